"""What an answer says its server-side tools were used, by kind (what the provider bills per use).

- Messages: ``usage.server_tool_use``, whose ``<kind>_requests`` counts are billed uses
  (``web_search_requests``, ``web_fetch_requests``; a kind the gateway does not know yet counts under its
  own name). A stream reports them in ``message_delta``; a stream cut before it is billed the
  ``server_tool_use`` blocks it relayed.
- Responses: the output items, one use per ``web_search_call``, ``file_search_call`` and
  ``image_generation_call``, and one ``code_interpreter`` use per container its ``code_interpreter_call``
  items ran in (OpenAI bills code interpreter per container).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from gateway.servertools.kinds import NO_USES, ToolUses, tool_uses

REQUESTS_SUFFIX = "_requests"
OUTPUT_ITEMS = {
    "web_search_call": "web_search",
    "file_search_call": "file_search",
    "image_generation_call": "image_generation",
}
"""Responses output items billed one use each, and their kinds."""
CODE_INTERPRETER_CALL = "code_interpreter_call"
BILLED_ITEMS = frozenset({*OUTPUT_ITEMS, CODE_INTERPRETER_CALL})
MESSAGES_BLOCKS = {"web_search": "web_search", "web_fetch": "web_fetch"}
"""The names of Messages ``server_tool_use`` blocks whose uses Anthropic bills, and their kinds."""


def anthropic_uses(usage: Mapping[str, Any]) -> ToolUses:
    """The billed uses in a Messages ``usage`` object."""
    counts = usage.get("server_tool_use")
    if not isinstance(counts, Mapping):
        return NO_USES
    return tool_uses(
        (name.removesuffix(REQUESTS_SUFFIX), value)
        for name, value in counts.items()
        if name.endswith(REQUESTS_SUFFIX) and type(value) is int
    )


def block_uses(blocks: Iterable[Mapping[str, Any]]) -> ToolUses:
    """The billed uses among Messages content blocks (``server_tool_use`` blocks, by tool name)."""
    return tool_uses(
        (MESSAGES_BLOCKS[name], 1)
        for block in blocks
        if block.get("type") == "server_tool_use" and (name := block.get("name")) in MESSAGES_BLOCKS
    )


def response_uses(response: Mapping[str, Any] | None) -> ToolUses:
    """The billed uses in a Responses response object (its ``output`` items)."""
    output = response.get("output") if response is not None else None
    return item_uses(output) if isinstance(output, list) else NO_USES


def item_uses(items: Iterable[object]) -> ToolUses:
    """The billed uses among Responses output items."""
    counts: list[tuple[str, int]] = []
    containers: set[str] = set()
    for item in items:
        if not isinstance(item, Mapping):
            continue
        kind = item.get("type")
        if kind in OUTPUT_ITEMS:
            counts.append((OUTPUT_ITEMS[kind], 1))
        elif kind == CODE_INTERPRETER_CALL:
            container = item.get("container_id")
            containers.add(container if isinstance(container, str) else f"item:{item.get('id')}")
    counts.append(("code_interpreter", len(containers)))
    return tool_uses(counts)


def most(first: ToolUses, second: ToolUses) -> ToolUses:
    """Per kind, the larger of two counts of the same uses (a total and what was seen of it)."""
    merged = dict(first)
    for kind, count in second:
        merged[kind] = max(merged.get(kind, 0), count)
    return tool_uses(merged)
