"""What a request asks of server-side tools, read from its body as each API spells it: the kinds it
offers the model (a tenant may refuse them) and the most uses of each it can make (held in the budget).

- chat completions: ``web_search_options`` (search models search once per request);
- Responses: ``tools`` of type ``web_search`` / ``web_search_preview`` (and dated variants),
  ``file_search``, ``code_interpreter``, ``image_generation``, ``tool_search``, ``mcp``; the uses are
  capped together by ``max_tool_calls`` when the request sets it, else each kind by the config's
  ``limits.held_tool_uses``;
- Messages: ``tools`` of type ``web_search_*``, ``web_fetch_*``, ``code_execution_*``,
  ``tool_search_tool_*``, ``mcp_toolset``, and ``mcp_servers``; each tool capped by its own ``max_uses``,
  else by ``limits.held_tool_uses``.

Only dictionary lookups on the plain chat request: a body without these fields costs nothing more.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gateway.servertools.kinds import NO_USES, ToolUses, tool_uses

RESPONSES_TYPES = (
    ("web_search", "web_search"),
    ("file_search", "file_search"),
    ("code_interpreter", "code_interpreter"),
    ("image_generation", "image_generation"),
    ("tool_search", "tool_search"),
    ("mcp", "mcp"),
)
"""Responses tool types and their kinds (a type is the name, or starts with it and ``_``:
``web_search_preview_2025_03_11`` is web search)."""

MESSAGES_TYPES = (
    ("web_search", "web_search"),
    ("web_fetch", "web_fetch"),
    ("code_execution", "code_execution"),
    ("tool_search_tool", "tool_search"),
    ("mcp_toolset", "mcp"),
)
"""Messages tool types and their kinds (dated: ``web_search_20250305`` is web search)."""


@dataclass(frozen=True, slots=True)
class RequestedTools:
    kinds: tuple[str, ...] = ()
    """Every server-side kind the request offers, sorted, each once."""
    held: ToolUses = NO_USES
    """The most uses of each kind the request can make."""
    total: int | None = None
    """A cap on all the request's tool calls together (Responses' ``max_tool_calls``)."""
    sent: tuple[tuple[str, str], ...] = ()
    """(kind, the type or field that asked for it as the body names it), for messages to the client."""

    def __bool__(self) -> bool:
        return bool(self.kinds)


NO_TOOLS = RequestedTools()


def chat_tools(body: Mapping[str, Any]) -> RequestedTools:
    if body.get("web_search_options") is None:
        return NO_TOOLS
    return RequestedTools(("web_search",), (("web_search", 1),), sent=(("web_search", "web_search_options"),))


def responses_tools(body: Mapping[str, Any], *, default_uses: int) -> RequestedTools:
    total = _positive(body.get("max_tool_calls"))
    found = [
        (kind, tool["type"], total or default_uses)
        for tool in _objects(body.get("tools"))
        if (kind := _kind(tool.get("type"), RESPONSES_TYPES)) is not None
    ]
    return _requested(found, total) if found else NO_TOOLS


def messages_tools(body: Mapping[str, Any], *, default_uses: int) -> RequestedTools:
    found = [
        (kind, tool["type"], _positive(tool.get("max_uses")) or default_uses)
        for tool in _objects(body.get("tools"))
        if (kind := _kind(tool.get("type"), MESSAGES_TYPES)) is not None
    ]
    servers = body.get("mcp_servers")
    if isinstance(servers, list) and servers:
        found.append(("mcp", "mcp_servers", default_uses))
    return _requested(found) if found else NO_TOOLS


def _requested(found: Sequence[tuple[str, str, int]], total: int | None = None) -> RequestedTools:
    """``found``: (kind, type as sent, most uses of that tool); under a cap on all calls together, a
    kind offered twice is held once."""
    kinds = tuple(sorted({kind for kind, _, _ in found}))
    if total is None:
        held = tool_uses((kind, count) for kind, _, count in found)
    else:
        held = tuple((kind, total) for kind in kinds)
    sent = tuple(dict.fromkeys((kind, name) for kind, name, _ in found))
    return RequestedTools(kinds, held, total, sent)


def _objects(value: object) -> list[Mapping[str, Any]]:
    return [item for item in value if isinstance(item, Mapping)] if isinstance(value, list) else []


def _kind(value: object, table: tuple[tuple[str, str], ...]) -> str | None:
    """The kind of a tool type: the type is a name of ``table``, or starts with it and ``_``."""
    if not isinstance(value, str):
        return None
    for name, kind in table:
        if value == name or value.startswith(name + "_"):
            return kind
    return None


def _positive(value: object) -> int | None:
    return value if type(value) is int and value > 0 else None
