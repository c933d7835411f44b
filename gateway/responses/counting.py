"""Tokens of a Responses request: its instructions, every input item and its tools.

Counted as the chat request it amounts to (``view.to_view``): message framing, roles and text as in a
chat request, a call as an assistant tool call (name and arguments), an output as a tool message, images
by the model's image rule, reasoning items by their readable summaries, and tools in the flat Responses
shape (``{type: function, name, description, parameters}``) by the same overheads as chat tools. What the
gateway cannot read (encrypted reasoning and compaction content, files) makes the count approximate.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from gateway.responses.items import input_items, kind_of
from gateway.responses.view import PRIVATE, to_view
from gateway.tokens import bound
from gateway.tokens.counter import TokenCount, TokenCounter


def count_responses(counter: TokenCounter, model: str, body: Mapping[str, Any]) -> TokenCount:
    tools = body.get("tools")
    messages = [countable(message) for message in to_view(body)]
    count = counter.count_chat(
        model, {"messages": messages, "tools": tools if isinstance(tools, list) else []}
    )
    if not count.approximate and _has_opaque(body):
        count = replace(count, approximate=True)
    return count


def countable(message: Mapping[str, Any]) -> dict[str, Any]:
    """A view message without the adapter's bookkeeping (item positions, text sources), so that the
    counter's per-message cache knows it by content: the same turn hits the cache wherever it stands
    (after a compression, or when the client drops its oldest items)."""
    kept = {key: value for key, value in message.items() if not key.startswith(PRIVATE)}
    content = kept.get("content")
    if isinstance(content, list):
        kept["content"] = [
            {key: value for key, value in part.items() if not key.startswith(PRIVATE)}
            if isinstance(part, Mapping)
            else part
            for part in content
        ]
    return kept


def responses_upper_bound(counter: TokenCounter, model: str, body: Mapping[str, Any], body_len: int) -> int:
    """Tokens the request cannot exceed, from its size in bytes (see ``gateway.tokens.bound``)."""
    return bound.token_upper_bound(
        body_len,
        image_parts=image_parts(body),
        image_max_tokens=counter.profile(model).image_rule.max_tokens,
        has_tools=bool(body.get("tools")),
    )


def image_parts(body: Mapping[str, Any]) -> int:
    """How many ``input_image`` parts the input holds (in messages and in call outputs)."""
    found = 0
    for item in input_items(body):
        for field in ("content", "output"):
            value = item.get(field)
            if isinstance(value, list):
                found += sum(
                    1 for part in value if isinstance(part, Mapping) and part.get("type") == "input_image"
                )
    return found


def _has_opaque(body: Mapping[str, Any]) -> bool:
    return any("encrypted_content" in item or kind_of(item) == "compaction" for item in input_items(body))
