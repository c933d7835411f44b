"""Tokens of ``tools`` / ``functions`` definitions, by the overheads OpenAI's cookbook documents.

Per function ``per_function`` (7 on o200k models, 10 on gpt-4 / gpt-3.5) plus the tokens of
``"name:description"``; with properties ``+3``, and per property ``3`` plus the tokens of
``"name:type:description"``; a property with an ``enum`` adds ``-3``, then ``3`` plus the tokens of each
item; ``12`` once at the end. A trailing period of a description is dropped, as in the cookbook. The
cookbook stops at top-level properties; here the properties of nested objects (and of array items) count
by the same rule. OpenAI calls these estimates; the cookbook's worked example is matched exactly.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

Count = Callable[[str], int]


@dataclass(frozen=True, slots=True)
class ToolOverheads:
    per_function: int
    with_properties: int = 3
    per_property: int = 3
    per_enum: int = -3
    per_enum_item: int = 3
    at_end: int = 12


O200K_TOOLS = ToolOverheads(per_function=7)
CL100K_TOOLS = ToolOverheads(per_function=10)


def overheads_for(encoding_name: str) -> ToolOverheads:
    return CL100K_TOOLS if encoding_name == "cl100k_base" else O200K_TOOLS


def count_tools(definitions: Sequence[Any], count: Count, overheads: ToolOverheads) -> int:
    """Tokens of a request's tool definitions (chat ``tools`` items or legacy ``functions`` items).

    Items without a function name are invalid (the upstream rejects them) and count nothing.
    """
    functions = [function for function in map(_function_of, definitions) if function is not None]
    if not functions:
        return 0
    total = overheads.at_end
    for function in functions:
        description = _strip_period(function.get("description"))
        total += overheads.per_function + count(f"{function['name']}:{description}")
        parameters = function.get("parameters")
        if isinstance(parameters, Mapping):
            total += _properties(parameters.get("properties"), count, overheads)
    return total


def _function_of(tool: Any) -> Mapping[str, Any] | None:
    if not isinstance(tool, Mapping):
        return None
    inner: Mapping[str, Any] = tool
    for wrapper in ("function", "custom"):
        if isinstance(tool.get(wrapper), Mapping):
            inner = tool[wrapper]
            break
    name = inner.get("name")
    return inner if isinstance(name, str) and name else None


def _properties(properties: Any, count: Count, overheads: ToolOverheads) -> int:
    if not isinstance(properties, Mapping) or not properties:
        return 0
    total = overheads.with_properties
    for name, schema in properties.items():
        schema = _mapping(schema)
        items = _mapping(schema.get("items"))
        total += overheads.per_property
        enum = schema.get("enum", items.get("enum"))
        if isinstance(enum, list):
            total += overheads.per_enum
            total += sum(overheads.per_enum_item + count(_text(item)) for item in enum)
        description = _strip_period(schema.get("description"))
        total += count(f"{name}:{_type(schema.get('type'))}:{description}")
        total += _properties(schema.get("properties"), count, overheads)
        total += _properties(items.get("properties"), count, overheads)
    return total


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _strip_period(description: Any) -> str:
    if not isinstance(description, str):
        return ""
    return description[:-1] if description.endswith(".") else description


def _type(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return " | ".join(item for item in value if isinstance(item, str))
    return ""


def _text(item: Any) -> str:
    if isinstance(item, str):
        return item
    try:
        return orjson.dumps(item).decode()
    except TypeError:  # not JSON data (orjson.JSONEncodeError is a TypeError)
        return str(item)
