"""Loading the YAML config: ``${VAR}`` interpolation, validation, and errors that name file and line."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from gateway.config import GatewayConfig, ReferenceProblems
from gateway.runtime import build_engine
from policies import PolicyConfigError

_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-(.*?))?\}")


class ConfigError(ValueError):
    """An invalid config file; ``problems`` are ``file:line: field: message`` strings."""

    def __init__(self, path: Path, problems: list[str]) -> None:
        self.path = path
        self.problems = problems
        super().__init__(f"invalid config {path}:\n  " + "\n  ".join(problems))


def interpolate(text: str, env: Mapping[str, str]) -> str:
    """Replace ``${VAR}`` and ``${VAR:-default}``; an unset ``${VAR}`` without default is an error."""

    def substitute(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        value = env.get(name)
        if value is None or (value == "" and default is not None):
            if default is None:
                raise KeyError(name)
            return default
        return value

    return _VAR.sub(substitute, text)


class _Builder:
    """Turns a composed YAML node tree into Python data, interpolating strings and remembering lines."""

    def __init__(self, path: Path, env: Mapping[str, str]) -> None:
        self.path = path
        self.env = env
        self.problems: list[str] = []

    def build(self, node: yaml.Node) -> Any:
        if isinstance(node, yaml.MappingNode):
            result: dict[Any, Any] = {}
            for key_node, value_node in node.value:
                key = self.build(key_node)
                if key in result:
                    self.problems.append(f"{self.where(key_node)}: duplicate key {key!r}")
                result[key] = self.build(value_node)
            return result
        if isinstance(node, yaml.SequenceNode):
            return [self.build(item) for item in node.value]
        assert isinstance(node, yaml.ScalarNode)
        value = (
            yaml.SafeLoader(b"").construct_object(node) if node.tag != "tag:yaml.org,2002:str" else node.value
        )
        if isinstance(value, str) and "${" in value:
            try:
                return interpolate(value, self.env)
            except KeyError as exc:
                self.problems.append(
                    f"{self.where(node)}: environment variable {exc.args[0]} is not set "
                    f"(write ${{{exc.args[0]}:-default}} to give a default)"
                )
                return ""
        return value

    def where(self, node: yaml.Node) -> str:
        return f"{self.path}:{node.start_mark.line + 1}"


def _node_at(root: yaml.Node, loc: tuple[int | str, ...]) -> yaml.Node:
    node = root
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            for key_node, value_node in node.value:
                if key_node.value == str(part):
                    node = value_node
                    break
            else:
                return node
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            node = node.value[part]
        else:
            return node
    return node


def parse_config(text: str, path: Path, env: Mapping[str, str] | None = None) -> GatewayConfig:
    env = os.environ if env is None else env
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        raise ConfigError(path, [f"{path}{line}: not valid YAML: {getattr(exc, 'problem', exc)}"]) from exc
    if root is None or not isinstance(root, yaml.MappingNode):
        raise ConfigError(path, [f"{path}:1: the config must be a mapping with providers and models"])
    builder = _Builder(path, env)
    data = builder.build(root)
    if builder.problems:
        raise ConfigError(path, builder.problems)
    try:
        config = GatewayConfig.model_validate(data)
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            cause = error.get("ctx", {}).get("error")
            if isinstance(cause, ReferenceProblems):
                problems += [_problem(builder, root, loc, message) for loc, message in cause.problems]
                continue
            loc = tuple(part for part in error["loc"] if not str(part).startswith("function-"))
            problems.append(_problem(builder, root, loc, error["msg"]))
        raise ConfigError(path, problems) from exc
    try:
        build_engine(config)
    except PolicyConfigError as exc:
        raise ConfigError(path, [_problem(builder, root, p.loc, p.message) for p in exc.problems]) from exc
    return config


def _problem(builder: _Builder, root: yaml.Node, loc: tuple[int | str, ...], message: str) -> str:
    field = ".".join(str(part) for part in loc) or "(top level)"
    return f"{builder.where(_node_at(root, loc))}: {field}: {message}"


def load_config(path: Path, env: Mapping[str, str] | None = None) -> GatewayConfig:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(path, [f"{path}: cannot read: {exc.strerror or exc}"]) from exc
    return parse_config(text, path, env)
