"""Thinking blocks left out of a request sent to another model than the one that wrote them.

A ``thinking`` block carries a signature and a ``redacted_thinking`` block encrypted data that only the
model which produced them can verify; another model rejects them (or their signature check fails). A
request rerouted to another model (a policy's reroute, a fallback) therefore goes without the thinking
blocks of its assistant messages, which costs the other model nothing it could have read. An assistant
message left with no block at all is left out too (the API refuses an empty one), unless it is the last
message (a prefill, which may be empty). Nothing else changes: every other message is the original
object, so its bytes and its ``cache_control`` are as the client sent them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

THINKING_BLOCKS = frozenset({"thinking", "redacted_thinking"})


def without_thinking(body: Mapping[str, Any]) -> tuple[dict[str, Any], int]:
    """``body`` without the thinking blocks of its assistant messages, and how many were left out
    (``body`` itself, as a dict, when there were none)."""
    messages = body.get("messages")
    if not isinstance(messages, list):
        return dict(body), 0
    kept: list[Any] = []
    dropped = 0
    for position, message in enumerate(messages):
        content = message.get("content") if isinstance(message, Mapping) else None
        if (
            not isinstance(message, Mapping)
            or message.get("role") != "assistant"
            or not isinstance(content, list)
        ):
            kept.append(message)
            continue
        blocks = [block for block in content if not _is_thinking(block)]
        if len(blocks) == len(content):
            kept.append(message)
            continue
        dropped += len(content) - len(blocks)
        if blocks or position == len(messages) - 1:
            kept.append({**message, "content": blocks})
    if not dropped:
        return body if isinstance(body, dict) else dict(body), 0
    return {**body, "messages": kept}, dropped


def without_foreign_thinking(body: Mapping[str, Any], model: str) -> tuple[dict[str, Any], int]:
    """``body`` as it goes to ``model``: unchanged when that is the model it asks for, else
    ``without_thinking``."""
    if body.get("model") == model:
        return body if isinstance(body, dict) else dict(body), 0
    return without_thinking(body)


def for_another_model(body: Mapping[str, Any], upstream_model: str) -> tuple[dict[str, Any], int]:
    """``body`` as it goes to another model than the one that wrote its thinking (a reroute, a fallback, an
    experiment's candidate): renamed, without its thinking blocks, and, in the middle of a tool loop, whose
    assistant message the API wants to start with this turn's own thinking, without ``thinking`` for that
    turn; with how many blocks were left out."""
    kept, dropped = without_thinking(body)
    changed: dict[str, Any] = {**kept, "model": upstream_model}
    if dropped and opens_tool_loop(changed):
        changed.pop("thinking", None)
    return changed, dropped


def opens_tool_loop(body: Mapping[str, Any]) -> bool:
    """The request answers tool calls (its last message holds tool results)."""
    messages = body.get("messages")
    last = messages[-1] if isinstance(messages, list) and messages else None
    content = last.get("content") if isinstance(last, Mapping) else None
    return isinstance(content, list) and any(
        isinstance(block, Mapping) and block.get("type") == "tool_result" for block in content
    )


def _is_thinking(block: Any) -> bool:
    return isinstance(block, Mapping) and block.get("type") in THINKING_BLOCKS
