"""A small Dockerfile reader: enough of the format to check deploy/Dockerfile without a Docker engine.

Comments and parser directives are dropped, ``\\`` continues a line, global ``ARG`` defaults are
substituted into ``FROM``, and each ``FROM`` starts a stage. Heredocs and escape directives are not
supported (the project's Dockerfile uses neither).
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass

_ARG_REFERENCE = re.compile(r"\$\{(\w+)\}|\$(\w+)")


@dataclass(frozen=True, slots=True)
class Instruction:
    keyword: str
    """upper case: FROM, RUN, COPY, ..."""
    flags: dict[str, str]
    """leading ``--name=value`` options (``--from=builder`` gives ``{"from": "builder"}``)"""
    arguments: str
    """the rest of the instruction, continuation lines joined with a space"""
    line: int

    def exec_form(self) -> list[str] | None:
        """The JSON array form (``["gateway", "serve"]``), or None for the shell form."""
        if not self.arguments.startswith("["):
            return None
        try:
            value = json.loads(self.arguments)
        except json.JSONDecodeError:
            return None  # Docker runs an invalid JSON array as a shell command
        if isinstance(value, list) and all(isinstance(item, str) for item in value):
            return value
        return None


@dataclass(frozen=True, slots=True)
class Stage:
    base: str
    name: str | None
    instructions: tuple[Instruction, ...]

    def all(self, keyword: str) -> list[Instruction]:
        return [item for item in self.instructions if item.keyword == keyword]

    def last(self, keyword: str) -> Instruction | None:
        found = self.all(keyword)
        return found[-1] if found else None

    def env(self) -> dict[str, str]:
        """Every ``ENV name=value`` of the stage, later ones winning (``$VAR`` left unexpanded)."""
        result: dict[str, str] = {}
        for item in self.all("ENV"):
            words = shlex.split(item.arguments)
            if len(words) >= 2 and "=" not in words[0]:  # legacy form: ENV NAME value
                result[words[0]] = " ".join(words[1:])
                continue
            for word in words:
                name, _, value = word.partition("=")
                result[name] = value
        return result


@dataclass(frozen=True, slots=True)
class Dockerfile:
    args: dict[str, str]
    """global ``ARG`` defaults, declared before the first ``FROM``"""
    stages: tuple[Stage, ...]

    @property
    def final(self) -> Stage:
        return self.stages[-1]

    def healthcheck(self) -> list[str] | None:
        """The final stage's ``HEALTHCHECK CMD`` in exec form; None when absent or not a JSON array."""
        check = self.final.last("HEALTHCHECK")
        if check is None:
            return None
        keyword, _, command = check.arguments.partition(" ")
        if keyword.upper() != "CMD":
            return None
        return Instruction("CMD", {}, command.strip(), check.line).exec_form()

    def stage(self, name: str) -> Stage:
        for stage in self.stages:
            if stage.name == name:
                return stage
        raise KeyError(name)


def logical_lines(text: str) -> list[tuple[int, str]]:
    """Instructions as (first line number, text), comments dropped and continuations joined."""
    result: list[tuple[int, str]] = []
    parts: list[str] = []
    start = 0
    for number, raw in enumerate(text.splitlines(), start=1):
        stripped = raw.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if not parts:
            start = number
        if stripped.endswith("\\"):
            parts.append(stripped[:-1].strip())
            continue
        parts.append(stripped)
        result.append((start, " ".join(part for part in parts if part)))
        parts = []
    if parts:
        result.append((start, " ".join(parts)))
    return result


def parse_instruction(line: int, text: str) -> Instruction:
    keyword, _, rest = text.partition(" ")
    flags: dict[str, str] = {}
    rest = rest.strip()
    while rest.startswith("--"):
        flag, _, rest = rest.partition(" ")
        name, _, value = flag[2:].partition("=")
        flags[name] = value
        rest = rest.strip()
    return Instruction(keyword=keyword.upper(), flags=flags, arguments=rest, line=line)


def substitute(text: str, args: dict[str, str]) -> str:
    return _ARG_REFERENCE.sub(lambda match: args.get(match.group(1) or match.group(2), ""), text)


def parse_dockerfile(text: str) -> Dockerfile:
    args: dict[str, str] = {}
    stages: list[Stage] = []
    current: list[Instruction] = []
    base, name = "", None
    for line, content in logical_lines(text):
        instruction = parse_instruction(line, content)
        if instruction.keyword == "FROM":
            if base:
                stages.append(Stage(base=base, name=name, instructions=tuple(current)))
            words = substitute(instruction.arguments, args).split()
            base = words[0]
            name = words[2] if len(words) == 3 and words[1].upper() == "AS" else None
            current = []
        elif not base and instruction.keyword == "ARG":
            arg_name, _, default = instruction.arguments.partition("=")
            args[arg_name] = default
        else:
            current.append(instruction)
    if base:
        stages.append(Stage(base=base, name=name, instructions=tuple(current)))
    return Dockerfile(args=args, stages=tuple(stages))
