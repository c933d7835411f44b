"""Assembling the forwarded messages: the best chunks that fit the budget, in document order, marked.

Each document block becomes a note saying that the document was excerpted, then its selected chunks
in document order, each run of neighbouring chunks merged into one excerpt (the overlap is not
repeated) under one marker such as ``[excerpts 17-19/812, ~tokens 10,200-12,100 of 600,000]`` (with
en dashes), then
the question tail when the question was cut off that block. Everything else is kept as it was.

The budget covers the whole request as the TokenCounter counts it. Chunks are taken in rank order
while their estimated cost (their tokens, less any overlap with a selected neighbour, plus a marker
when they start a new excerpt) fits what the kept messages and notes leave; the result is then
counted exactly, and while it is over the budget the lowest-ranked selected chunks are dropped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from compressors.protocols import Message, TokenCounter
from compressors.retrieval.documents import Document, replace_block
from compressors.retrieval.index import DocumentIndex

_MARGIN_SHARE = 0.005
_MARGIN_MIN = 8
_MAX_TRIMS = 32


@dataclass(frozen=True, slots=True)
class Placed:
    """A document with its index."""

    document: Document
    index: DocumentIndex


@dataclass(frozen=True, slots=True)
class Assembly:
    messages: list[Message]
    tokens: int
    """Exact count of ``messages``."""
    selected: int
    fits: bool
    """False when even the kept messages and the notes, without any excerpt, exceed the budget."""


def note(total_tokens: int) -> str:
    return (
        f"[Document of ~{total_tokens:,} tokens, excerpted for relevance to the question: only the "
        "excerpts below are included, in document order, each marked with its place; the text between "
        "them was left out.]"
    )


def marker(first: int, last: int, index: DocumentIndex) -> str:
    chunks = index.chunks
    start, end = int(chunks.token_starts[first]), int(chunks.token_ends[last])
    place = f"{first + 1}/{len(chunks)}" if first == last else f"{first + 1}\u2013{last + 1}/{len(chunks)}"
    noun = "excerpt" if first == last else "excerpts"
    return f"[{noun} {place}, ~tokens {start:,}\u2013{end:,} of {chunks.total_tokens:,}]"


def assemble(
    messages: Sequence[Message],
    placed: Sequence[Placed],
    ranking: Sequence[tuple[int, int]],
    *,
    counter: TokenCounter,
    budget: int,
) -> Assembly:
    """Select and place chunks; ``ranking`` lists (document number, chunk number), best first."""
    selection: list[set[int]] = [set() for _ in placed]
    skeleton = _messages(messages, placed, selection)
    base = counter.count_messages(skeleton)
    if base > budget:
        return Assembly(list(messages), base, 0, fits=False)
    available = budget - base
    available -= max(_MARGIN_MIN, int(available * _MARGIN_SHARE))
    marker_costs = [_marker_cost(item.index, counter) for item in placed]
    taken: list[tuple[int, int, int]] = []
    for number, chunk in ranking:
        cost = _added_cost(placed[number].index, selection[number], chunk, marker_costs[number])
        if cost <= available:
            selection[number].add(chunk)
            taken.append((number, chunk, cost))
            available -= cost
    for _ in range(_MAX_TRIMS):
        result = _messages(messages, placed, selection) if taken else skeleton
        tokens = counter.count_messages(result) if taken else base
        if tokens <= budget:
            return Assembly(result, tokens, len(taken), fits=True)
        excess = tokens - budget
        while taken and excess > 0:
            number, chunk, cost = taken.pop()
            selection[number].discard(chunk)
            excess -= max(cost, 1)
    return Assembly(skeleton, base, 0, fits=True)


def _marker_cost(index: DocumentIndex, counter: TokenCounter) -> int:
    """Tokens of the widest marker of this document, plus its line breaks."""
    count = len(index.chunks)
    total = f"{index.total_tokens:,}"
    return (
        counter.count_text(
            f"[excerpts {count}\u2013{count}/{count}, ~tokens {total}\u2013{total} of {total}]"
        )
        + 3
    )


def _added_cost(index: DocumentIndex, selected: set[int], chunk: int, marker_cost: int) -> int:
    starts, ends = index.chunks.token_starts, index.chunks.token_ends
    left, right = chunk - 1 in selected, chunk + 1 in selected
    if left and right:
        return int(starts[chunk + 1] - ends[chunk - 1]) - marker_cost
    if left:
        return int(ends[chunk] - ends[chunk - 1])
    if right:
        return int(starts[chunk + 1] - starts[chunk])
    return int(ends[chunk] - starts[chunk]) + marker_cost


def _runs(selected: set[int]) -> list[tuple[int, int]]:
    runs: list[tuple[int, int]] = []
    for chunk in sorted(selected):
        if runs and runs[-1][1] == chunk - 1:
            runs[-1] = (runs[-1][0], chunk)
        else:
            runs.append((chunk, chunk))
    return runs


def _block_text(item: Placed, selected: set[int]) -> str:
    document, chunks = item.document, item.index.chunks
    text = document.text
    parts = [note(chunks.total_tokens)]
    for first, last in _runs(selected):
        excerpt = text[int(chunks.char_starts[first]) : int(chunks.char_ends[last])].strip()
        parts.append(f"{marker(first, last, item.index)}\n{excerpt}")
    tail = document.tail.strip()
    if tail:
        parts.append(tail)
    return "\n\n".join(parts)


def _messages(
    messages: Sequence[Message], placed: Sequence[Placed], selection: list[set[int]]
) -> list[Message]:
    result = list(messages)
    for item, selected in zip(placed, selection, strict=True):
        replace_block(result, item.document.block, _block_text(item, selected))
    return result
