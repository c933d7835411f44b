"""Loading the YAML config: ``${VAR}`` interpolation, validation, and errors that name file and line (and,
for a field the schema does not know, the field that was probably meant)."""

from __future__ import annotations

import difflib
import os
import re
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from gateway.config.runtime import build_engine
from gateway.config.schema.root import GatewayConfig, ReferenceProblems
from policies import PolicyConfigError

_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-(.*?))?\}")
_NOT_A_REFERENCE = re.compile(r"\$\{(?![A-Za-z_][A-Za-z0-9_]*(?::-.*?)?\})")
"""``${`` that starts no ``${VAR}`` or ``${VAR:-default}`` (``${{VAR}}``, ``${VAR``): it would be taken as
text, a key or URL that silently does not work."""
_NOT_A_REFERENCE_TEXT = "`${` must start ${VAR} or ${VAR:-default} (an environment variable)"
_NOT_A_KEY = (
    "a mapping or list where a key was expected: `{{...}}` is YAML for a mapping inside a mapping; "
    "to read an environment variable write ${VAR}"
)


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
                if not isinstance(key_node, yaml.ScalarNode):  # ``{{VAR}}``: a mapping used as a key
                    self.problems.append(f"{self.where(key_node)}: {_NOT_A_KEY}")
                    continue
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
            if _NOT_A_REFERENCE.search(value):
                self.problems.append(f"{self.where(node)}: {_NOT_A_REFERENCE_TEXT}")
                return ""
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
            message = error["msg"] + (_did_you_mean(loc) if error["type"] == "extra_forbidden" else "")
            problems.append(_problem(builder, root, loc, message))
        raise ConfigError(path, problems) from exc
    try:
        build_engine(config)
    except PolicyConfigError as exc:
        raise ConfigError(path, [_problem(builder, root, p.loc, p.message) for p in exc.problems]) from exc
    return config


def _problem(builder: _Builder, root: yaml.Node, loc: tuple[int | str, ...], message: str) -> str:
    field = ".".join(str(part) for part in loc) or "(top level)"
    return f"{builder.where(_node_at(root, loc))}: {field}: {message}"


def _did_you_mean(loc: tuple[int | str, ...]) -> str:
    """``; did you mean 'models'?`` for an unknown field ``loc[-1]`` close to one the schema allows where
    it stands; pydantic's own message names no alternative, and a typo is the usual cause."""
    fields = _fields_at(GatewayConfig, loc[:-1]) if loc else None
    if fields is None:
        return ""
    matches = difflib.get_close_matches(str(loc[-1]), fields, n=1)
    return f"; did you mean {matches[0]!r}?" if matches else ""


def _fields_at(annotation: Any, loc: tuple[int | str, ...]) -> list[str] | None:
    """The fields of the model found by following ``loc`` down from ``annotation`` (through model
    fields, dict values, tuple and list items, and ``X | None``); None where it leads to no model."""
    for part in loc:
        annotation = _step(annotation, part)
        if annotation is None:
            return None
    model = next((arm for arm in _arms(annotation) if _is_model(arm)), None)
    return list(model.model_fields) if model is not None else None


def _step(annotation: Any, part: int | str) -> Any:
    """What ``part`` of a value of type ``annotation`` is typed as; None when the schema does not say."""
    for arm in _arms(annotation):
        if _is_model(arm):
            field = arm.model_fields.get(str(part))
            if field is not None:
                return field.annotation
        elif typing.get_origin(arm) is dict:
            return typing.get_args(arm)[1]
        elif typing.get_origin(arm) in (tuple, list) and isinstance(part, int):
            return typing.get_args(arm)[0]
    return None


def _arms(annotation: Any) -> tuple[Any, ...]:
    """The members of a union (``X | None``, ``Optional[X]``), or the annotation itself."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return typing.get_args(annotation)
    return (annotation,)


def _is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def load_config(path: Path, env: Mapping[str, str] | None = None) -> GatewayConfig:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(path, [f"{path}: cannot read: {exc.strerror or exc}"]) from exc
    return parse_config(text, path, env)
