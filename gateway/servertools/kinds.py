"""The kinds of server-side tools, and tool uses as a value.

A kind is the gateway's one name for a tool whatever the API calls it: ``web_search`` is Anthropic's
``web_search_20250305`` (and later dated versions), OpenAI Responses' ``web_search`` and
``web_search_preview``, and chat completions' ``web_search_options``. Prices per use are keyed by kind
(``models.<name>.pricing.per_use``), and so are a tenant's allowance and the cost event's ``tool_uses``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Literal, get_args

ServerToolKind = Literal[
    "web_search",
    "web_fetch",
    "code_execution",
    "file_search",
    "code_interpreter",
    "image_generation",
    "tool_search",
    "mcp",
]
KINDS: tuple[str, ...] = get_args(ServerToolKind)
"""Every kind a request can ask for (a tenant's allowance names them)."""

ToolUses = tuple[tuple[str, int], ...]
"""Uses by kind, sorted by kind, each count above 0: hashable, so it fits the frozen ``Usage``."""

NO_USES: ToolUses = ()


def tool_uses(counts: Mapping[str, int] | Iterable[tuple[str, int]]) -> ToolUses:
    """``counts`` as ``ToolUses``: counts of one kind added, kinds without uses left out."""
    pairs = counts.items() if isinstance(counts, Mapping) else counts
    summed: dict[str, int] = {}
    for kind, count in pairs:
        if count > 0:
            summed[kind] = summed.get(kind, 0) + count
    return tuple(sorted(summed.items()))


def uses_text(uses: ToolUses) -> str | None:
    """``(("file_search", 2), ("web_search", 50))`` → ``"file_search=2;web_search=50"``; None for none."""
    return ";".join(f"{kind}={count}" for kind, count in uses) or None


def parse_uses_text(text: str | None) -> ToolUses:
    """The inverse of ``uses_text`` (unreadable parts are left out)."""
    pairs = []
    for part in (text or "").split(";"):
        kind, _, count = part.partition("=")
        if kind and count.isdigit():
            pairs.append((kind, int(count)))
    return tool_uses(pairs)
