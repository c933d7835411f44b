"""What both compressors read the same way in a request's chat messages."""

from __future__ import annotations

from collections.abc import Sequence

from compressors.protocols import Message

INSTRUCTION_ROLES = frozenset({"system", "developer"})
"""Roles whose messages stay verbatim: never summarised, never excerpted as documents."""
ORIGIN = "_gateway_origin"
"""Set by a front whose API message becomes several chat messages (Anthropic's user message of tool
results and text): ``[message position, [block positions]]`` on each, so that the pieces of one message
can be told from messages of their own."""


def same_message(first: Message, second: Message) -> bool:
    """Whether two chat messages are pieces of one API message (``ORIGIN``)."""
    one, other = first.get(ORIGIN), second.get(ORIGIN)
    return (
        isinstance(one, list) and isinstance(other, list) and bool(one) and bool(other) and one[0] == other[0]
    )


def latest_user(messages: Sequence[Message]) -> int | None:
    """Position of the last message whose role is ``user``; None when there is none."""
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].get("role") == "user":
            return index
    return None
