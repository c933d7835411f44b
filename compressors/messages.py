"""What both compressors read the same way in a request's chat messages."""

from __future__ import annotations

from collections.abc import Sequence

from compressors.protocols import Message

INSTRUCTION_ROLES = frozenset({"system", "developer"})
"""Roles whose messages stay verbatim: never summarised, never excerpted as documents."""


def latest_user(messages: Sequence[Message]) -> int | None:
    """Position of the last message whose role is ``user``; None when there is none."""
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].get("role") == "user":
            return index
    return None
