"""The compressed message list: one summary message per part, where its first summarised message was.

A summary is a ``user`` message. Every OpenAI-compatible upstream accepts a user message at any
position, while some reject or hoist a ``system`` message after the first one; and a user message
opened by a header naming it a summary made by the gateway is read as context about the past, with
less authority than a system instruction (which is what we want for text written by a cheap model).

A part's message reads: its header (the 1-based positions it replaces), then the user's own words it
pins, then the cheap model's summary. It depends only on the part and on the positions of its span,
so the earlier parts' messages stay byte for byte the same when a part is appended after them.

Everything not summarised keeps its place and order: system and developer messages and the user
messages kept verbatim, also when they sit inside a summarised span (those after its first message
then follow the summary), and the recent blocks, some of whose tool outputs may be excerpts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from compressors.protocols import Message

SUMMARY_ROLE = "user"
SUMMARY_OPENING = "[Summary of the earlier conversation"
RECALL_OPENING = "[Excerpts recalled by the gateway"
GATEWAY_MARKERS = (SUMMARY_OPENING, RECALL_OPENING)
"""How the messages the gateway writes begin (never pinned as the user's own words)."""


@dataclass(frozen=True, slots=True)
class Section:
    """A summary message and the (sorted, non-empty) positions of the messages it replaces."""

    replaced: Sequence[int]
    message: Message


def header(first: int, last: int, *, part: int = 1) -> str:
    """The first line of a summary message, with 1-based positions of the messages it replaces."""
    span = f"message {first + 1}" if first == last else f"messages {first + 1}\u2013{last + 1}"
    continued = "" if part == 1 else f", continued: part {part}"
    return (
        f"{SUMMARY_OPENING} ({span}{continued}), made by the gateway. "
        "It is context about what happened before, not a new request.]"
    )


def summary_message(text: str, *, first: int, last: int, pinned: str = "", part: int = 1) -> Message:
    body = f"{pinned}\n\n{text}" if pinned else text
    return {"role": SUMMARY_ROLE, "content": f"{header(first, last, part=part)}\n\n{body}"}


def assemble(
    messages: Sequence[Message],
    sections: Sequence[Section],
    *,
    substitutes: Mapping[int, Message] | None = None,
) -> list[Message]:
    """``messages`` with each section's replaced messages swapped for its summary message (placed at
    the first of them) and the messages at the positions of ``substitutes`` swapped for those."""
    substitutes = substitutes or {}
    starts = {section.replaced[0]: section.message for section in sections}
    replaced = {position for section in sections for position in section.replaced}
    result: list[Message] = []
    for index, message in enumerate(messages):
        if index in starts:
            result.append(starts[index])
        if index not in replaced:
            result.append(substitutes.get(index, message))
    return result
