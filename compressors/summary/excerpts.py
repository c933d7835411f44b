"""Head/tail excerpts: tool outputs cut by the cap on the verbatim part, and long pinned messages.

An excerpt keeps the first ``head`` and the last ``tail`` tokens of a text, with a marker between them
saying how many tokens were left out, e.g. ``[… 18,350 tokens of this tool output left out by the
gateway …]``. It is a pure function of the text, the sizes and the encoding: the same input gives the
same bytes, so a compacted request that excerpts a message reads the same on every turn that reuses it.

The cap (``SummarySettings.keep_recent_max_tokens``) is applied inside what stays verbatim: the tool
outputs (``tool`` and ``function`` messages) of the recent blocks are excerpted oldest first until the
verbatim part counts at most the cap or none is left. The outputs the model is about to answer (those
after the last assistant message, when it called tools) are never cut: its next step depends on them.
What an excerpt leaves out is not lost: the recall document covers the full text of every excerpted
output (``compaction.View.recallable``), so a later question can bring the middle back. Which ones were
cut is stored with the summary (as block number and place in the block) and reproduced as is on reuse,
not recomputed. The head and tail sizes are read from the settings of each request: changing them
changes the bytes once.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from compressors.protocols import Message, TokenCounter
from compressors.summary.selection import ANSWER_ROLES, Selection, answered
from compressors.summary.settings import SummarySettings
from compressors.summary.transcript import content_text

Ref = tuple[int, int]
"""A message named by its block number and its place in that block."""
MIN_SAVING = 32
"""A text is excerpted only when that leaves out more than this many tokens (the marker costs some)."""


def head_tail(text: str, *, head: int, tail: int, counter: TokenCounter, noun: str) -> str | None:
    """``text`` cut to its first ``head`` and last ``tail`` tokens around a marker; None when that would
    not make it noticeably shorter."""
    ids = counter.encode(text)
    left_out = len(ids) - head - tail
    if left_out <= MIN_SAVING:
        return None
    marker = f"[\u2026 {left_out:,} tokens of this {noun} left out by the gateway \u2026]"
    start = counter.decode(ids[:head]) if head else ""
    end = counter.decode(ids[len(ids) - tail :]) if tail else ""
    return "\n".join(part for part in (start, marker, end) if part)


def excerpt_message(message: Message, settings: SummarySettings, counter: TokenCounter) -> Message | None:
    """A copy of the tool output ``message`` with its content excerpted (None: nothing to cut)."""
    text = head_tail(
        content_text(message.get("content")),
        head=settings.excerpt_head_tokens,
        tail=settings.excerpt_tail_tokens,
        counter=counter,
        noun="tool output",
    )
    return None if text is None else {**message, "content": text}


def shrink(
    messages: Sequence[Message],
    selection: Selection,
    *,
    verbatim: Sequence[int],
    settings: SummarySettings,
    counter: TokenCounter,
) -> tuple[Ref, ...]:
    """The tool outputs of ``blocks[split:]`` to excerpt, oldest first, so that the messages at the
    positions ``verbatim`` fit the cap (all of them when even that is not enough)."""
    cap = settings.keep_recent_max_tokens
    if cap is None:
        return ()
    total = counter.count_messages([messages[i] for i in verbatim])
    cut: list[Ref] = []
    spared = answered(messages)
    for ref, position in _tool_outputs(messages, selection):
        if position in spared:
            continue
        if total <= cap:
            break
        shorter = excerpt_message(messages[position], settings, counter)
        if shorter is not None:
            total -= counter.count_messages([messages[position]]) - counter.count_messages([shorter])
            cut.append(ref)
    return tuple(cut)


def apply(
    messages: Sequence[Message],
    selection: Selection,
    refs: Iterable[Ref],
    *,
    settings: SummarySettings,
    counter: TokenCounter,
) -> dict[int, Message]:
    """The excerpted copies of the messages ``refs`` names, by position (a stale ref is skipped, and so
    is one naming an output the model is about to answer, as on a branch back to an earlier step)."""
    replaced: dict[int, Message] = {}
    spared = answered(messages)
    for block, place in refs:
        if block >= len(selection.blocks) or place >= len(selection.blocks[block].indices):
            continue
        position = selection.blocks[block].indices[place]
        if messages[position].get("role") not in ANSWER_ROLES or position in spared:
            continue
        shorter = excerpt_message(messages[position], settings, counter)
        if shorter is not None:
            replaced[position] = shorter
    return replaced


def _tool_outputs(messages: Sequence[Message], selection: Selection) -> Iterable[tuple[Ref, int]]:
    for number in range(selection.split, len(selection.blocks)):
        for place, position in enumerate(selection.blocks[number].indices):
            if messages[position].get("role") in ANSWER_ROLES:
                yield (number, place), position
