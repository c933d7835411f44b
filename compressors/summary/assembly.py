"""The compressed message list: one summary message where the first summarised message was.

The summary is a ``user`` message. Every OpenAI-compatible upstream accepts a user message at any
position, while some reject or hoist a ``system`` message after the first one; and a user message
opened by a header naming it a summary made by the gateway is read as context about the past, with
less authority than a system instruction (which is what we want for text written by a cheap model).

Everything not summarised keeps its place and order: system and developer messages and the last user
message, also when they sit inside the summarised run (those after its first message then follow the
summary), and the recent blocks.
"""

from __future__ import annotations

from collections.abc import Sequence

from compressors.protocols import Message

SUMMARY_ROLE = "user"


def header(first: int, last: int) -> str:
    """The first line of a summary message, with 1-based positions of the messages it replaces."""
    span = f"message {first + 1}" if first == last else f"messages {first + 1}\u2013{last + 1}"
    return (
        f"[Summary of the earlier conversation ({span}), made by the gateway. "
        "It is context about what happened before, not a new request.]"
    )


def summary_message(text: str, *, first: int, last: int) -> Message:
    return {"role": SUMMARY_ROLE, "content": f"{header(first, last)}\n\n{text}"}


def assemble(messages: Sequence[Message], *, summarized: Sequence[int], text: str) -> list[Message]:
    """``messages`` with those at the (sorted, non-empty) positions ``summarized`` replaced by one
    summary message placed at the first of them."""
    replaced = set(summarized)
    first, last = summarized[0], summarized[-1]
    result: list[Message] = []
    for index, message in enumerate(messages):
        if index == first:
            result.append(summary_message(text, first=first, last=last))
        if index not in replaced:
            result.append(message)
    return result
