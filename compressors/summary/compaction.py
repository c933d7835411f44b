"""A compaction: how a cached one lays out a request, and how a new one is written.

Laid out, a compaction (``store.CachedSummary``) is: each part's summary message in place of the
messages of its span, the messages kept verbatim (system messages, the user messages its parts keep in
place, the last user message) where they were, then everything after its prefix as the client sent it,
but for the tool outputs it excerpted when it was written (the same ones, to the same bytes).

A new compaction of ``blocks[:split]`` is written in one of three ways:

* first: one part summarising ``blocks[:split]``;
* appended: the cached parts as they are, then a part summarising only ``blocks[cached:split]``,
  written with the earlier parts' text as context, so the earlier summary messages stay byte for
  byte the same and the provider's cache keeps serving them;
* rolled up: when the parts' summaries together pass ``summary_parts_max_tokens`` after appending, they
  are merged into one part by the cheap model, and the whole span is pinned again.

A part pins the user's own words of its span (``pins``) within what ``pinned_tokens`` leaves after the
earlier parts, and keeps the last user message verbatim in place when it falls inside its span.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import compressors.summary.excerpts as excerpts
from compressors.protocols import Message, TokenCounter
from compressors.summary.assembly import Section, assemble, summary_message
from compressors.summary.excerpts import Ref
from compressors.summary.pins import Pins, pin
from compressors.summary.selection import Selection
from compressors.summary.settings import SummarySettings
from compressors.summary.store import CachedSummary, Part
from compressors.summary.summarizer import Summarizer
from compressors.summary.transcript import content_text, render_block


@dataclass(frozen=True, slots=True)
class View:
    """A request laid out with a compaction."""

    messages: list[Message]
    tokens: int
    """``TokenCounter.count_messages(messages)``."""
    replaced: list[int]
    """Positions of the request's messages the summary messages replace, in order."""
    sections: tuple[Section, ...]
    pinned: int
    excerpted: int
    cut: tuple[int, ...] = ()
    """Positions of the tool outputs sent as excerpts, in order."""

    def recallable(self, messages: Sequence[Message]) -> list[int]:
        """Positions of the messages the request no longer holds whole: those the summary messages
        replace and the excerpted tool outputs (recall can bring back what either left out), but for the
        messages of ``messages`` a summary message quotes whole (the user's pinned words): the request
        holds them already, and recalling them again would only crowd out what it lacks (an earlier
        question worded like the latest one outranks the answer it asked for)."""
        quoted = "\n".join(content_text(section.message.get("content")) for section in self.sections)
        return [
            position
            for position in sorted({*self.replaced, *self.cut})
            if not _quoted(messages[position], quoted)
        ]

    def verbatim(self) -> list[Message]:
        """The messages that are not summary messages."""
        written = {id(section.message) for section in self.sections}
        return [message for message in self.messages if id(message) not in written]


def lay_out(
    messages: Sequence[Message],
    selection: Selection,
    summary: CachedSummary,
    *,
    settings: SummarySettings,
    counter: TokenCounter,
) -> View:
    sections: list[Section] = []
    pinned = 0
    start = 0
    for number, part in enumerate(summary.parts, start=1):
        positions = selection.summarized(part.blocks, start=start, kept=summary.kept)
        start = part.blocks
        if not positions:
            continue
        message = summary_message(
            part.text, first=positions[0], last=positions[-1], pinned=part.pinned, part=number
        )
        sections.append(Section(positions, message))
        pinned += part.pins
    substitutes = excerpts.apply(messages, selection, summary.excerpted, settings=settings, counter=counter)
    compressed = assemble(messages, sections, substitutes=substitutes)
    return View(
        messages=compressed,
        tokens=counter.count_messages(compressed),
        replaced=[position for section in sections for position in section.replaced],
        sections=tuple(sections),
        pinned=pinned,
        excerpted=len(substitutes),
        cut=tuple(sorted(substitutes)),
    )


def kept_blocks(selection: Selection, start: int, end: int) -> tuple[int, ...]:
    """The block of the last user message when it lies in ``blocks[start:end]`` (it stays in place)."""
    blocks = selection.blocks
    return tuple(n for n in range(start, end) if blocks[n].indices[0] == selection.last_user)


async def write(
    messages: Sequence[Message],
    selection: Selection,
    *,
    base: CachedSummary | None,
    excerpted: tuple[Ref, ...],
    summarizer: Summarizer,
    settings: SummarySettings,
    counter: TokenCounter,
) -> CachedSummary:
    """A compaction of ``blocks[:split]``: first, appended after ``base`` or rolled up (see above)."""
    split = selection.split
    earlier = () if base is None else base.parts
    start = 0 if base is None else base.blocks
    kept = kept_blocks(selection, start, split)
    pieces = [render_block(messages, block) for block in selection.blocks[start:split]]
    context = "\n\n".join(part.text for part in earlier) if earlier else None
    text = await summarizer.summarize(pieces, context=context)
    span = selection.summarized(split, start=start)
    budget = settings.pinned_tokens - sum(part.pinned_tokens for part in earlier)
    pins = pin(messages, span, budget=budget, settings=settings, counter=counter)
    parts = (*earlier, _part(split, text, pins, kept))
    if len(parts) > 1 and sum(counter.count_text(part.text) for part in parts) > settings.parts_limit:
        parts = (await _roll_up(messages, selection, parts, summarizer, settings, counter),)
    return CachedSummary(blocks=split, parts=parts, excerpted=excerpted)


async def _roll_up(
    messages: Sequence[Message],
    selection: Selection,
    parts: Sequence[Part],
    summarizer: Summarizer,
    settings: SummarySettings,
    counter: TokenCounter,
) -> Part:
    """One part merging ``parts``: its summary by the cheap model, its pins taken anew."""
    split = selection.split
    text = await summarizer.merge([part.text for part in parts])
    kept = kept_blocks(selection, 0, split)
    span = selection.summarized(split)
    pins = pin(messages, span, budget=settings.pinned_tokens, settings=settings, counter=counter)
    return _part(split, text, pins, kept)


def _part(blocks: int, text: str, pins: Pins, kept: tuple[int, ...]) -> Part:
    return Part(
        blocks=blocks, text=text, pinned=pins.text, pins=pins.count, pinned_tokens=pins.tokens, kept=kept
    )


def verbatim(
    messages: Sequence[Message],
    selection: Selection,
    base: CachedSummary | None,
    *,
    settings: SummarySettings,
    counter: TokenCounter,
) -> tuple[tuple[Ref, ...], int]:
    """The tool outputs a new compaction excerpts (by the cap), and the tokens of what it keeps
    verbatim once they are cut."""
    replaced = set(selection.summarized(kept=() if base is None else base.kept))
    positions = [i for i in range(len(messages)) if i not in replaced]
    refs = excerpts.shrink(messages, selection, verbatim=positions, settings=settings, counter=counter)
    substitutes = excerpts.apply(messages, selection, refs, settings=settings, counter=counter)
    tokens = counter.count_messages([substitutes.get(i, messages[i]) for i in positions])
    return refs, tokens


def _quoted(message: Message, quoted: str) -> bool:
    """Whether ``quoted`` holds the whole text of the user message ``message``."""
    if message.get("role") != "user":
        return False
    text = content_text(message.get("content")).strip()
    return bool(text) and text in quoted
