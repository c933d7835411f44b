"""Assembling the forwarded messages: the best chunks that fit the budget, in document order, marked.

Each document block becomes a note saying that the document was excerpted, then its selected chunks
in document order, each run of neighbouring chunks merged into one excerpt (the overlap is not
repeated) under one marker such as ``[excerpts 17-19/812, ~tokens 10,200-12,100 of 600,000]`` (with
en dashes), then
the question tail when the question was cut off that block. Everything else is kept as it was.

With a ``stable_share`` (``stable``), the excerpts come in two parts, each in document order under a
header line: part 1, the excerpts kept for every question about the document (the same bytes each
time, so a provider's prefix cache serves them), then part 2, those chosen for the latest question
among the other chunks; a run of neighbours is merged within a part, never across the two.

The budget covers the whole request as the TokenCounter counts it. Chunks are taken in rank order
while their estimated cost (their tokens, less any overlap with a selected neighbour, plus a marker
when they start a new excerpt) fits what the kept messages and notes leave; the result is then
counted exactly, and while it is over the budget the lowest-ranked selected chunks are dropped (those
of part 2 first).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from compressors.protocols import Message, TokenCounter
from compressors.retrieval.documents import Document, replace_block
from compressors.retrieval.index import DocumentIndex
from compressors.retrieval.stable import Kept

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
    kept: Kept | None = None
    """The kept chunks sent (None when the excerpts are not in two parts)."""
    kept_reused: bool = False
    """The kept chunks are the ones asked to keep: the request repeats the earlier one's bytes up to
    the end of its first document's kept part."""
    kept_tokens: int = 0
    """About how many tokens the kept excerpts take (with their markers)."""


def note(total_tokens: int) -> str:
    return (
        f"[Document of ~{total_tokens:,} tokens, excerpted for relevance to the question: only the "
        "excerpts below are included, in document order, each marked with its place; the text between "
        "them was left out.]"
    )


def staged_note(total_tokens: int) -> str:
    return (
        f"[Document of ~{total_tokens:,} tokens, excerpted: only the excerpts below are included, each "
        "marked with its place; the text between them was left out. Part 1 holds excerpts kept the same "
        "for every question about this document; part 2 holds the excerpts chosen for the latest "
        "question. Each part is in document order.]"
    )


KEPT_HEADER = "[Part 1: excerpts kept for every question about this document]"
FRESH_HEADER = "[Part 2: excerpts chosen for the latest question]"


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
    stable_share: float = 0.0,
    kept: Kept | None = None,
) -> Assembly:
    """Select and place chunks; ``ranking`` lists (document number, chunk number), best first.

    With a ``stable_share``, each document's excerpts come in two parts (see ``stable``): ``kept``
    when it is valid for these documents and takes at least half that share of the room and at most
    halfway from that share to all of it (the turns grow, so the room shrinks: a little slack spares a
    rewrite each turn), else the best-ranked chunks within that share; then the best-ranked others in
    what is left.
    """
    staged = stable_share > 0
    core: list[set[int]] = [set() for _ in placed]
    fresh: list[set[int]] = [set() for _ in placed]
    skeleton = _messages(messages, placed, core, fresh, staged)
    base = counter.count_messages(skeleton)
    if base > budget:
        return Assembly(list(messages), base, 0, fits=False)
    available = budget - base
    available -= max(_MARGIN_MIN, int(available * _MARGIN_SHARE))
    marker_costs = [_marker_cost(item.index, counter) for item in placed]
    core_taken: list[tuple[int, int, int]] = []
    reused = False
    if staged:
        cap = int(available * stable_share)
        keep_cap = int(available * (1 + stable_share) / 2)  # slack: the turns grow, the room shrinks
        sizes = [len(item.index.chunks) for item in placed]
        if kept is not None and kept.valid_for(sizes):
            for number, chunks in enumerate(kept.chunks):
                core[number].update(chunks)
            cost = sum(
                _set_cost(item.index, selected, marker_cost)
                for item, selected, marker_cost in zip(placed, core, marker_costs, strict=True)
            )
            reused = 0 < cost and cap // 2 <= cost <= keep_cap
            if reused:  # in document order, so that trimming (rare) drops the last ones first
                core_taken = [
                    (number, chunk, 0) for number, selected in enumerate(core) for chunk in sorted(selected)
                ]
                available -= cost
            else:
                core = [set() for _ in placed]
        if not reused:
            core_taken = _take(placed, ranking, core, None, marker_costs, cap)
            available -= sum(cost for _, _, cost in core_taken)
    taken = _take(placed, ranking, fresh, core, marker_costs, available)
    for _ in range(_MAX_TRIMS):
        result = _messages(messages, placed, core, fresh, staged) if taken or core_taken else skeleton
        tokens = counter.count_messages(result) if taken or core_taken else base
        if tokens <= budget:
            return _assembly(result, tokens, placed, core, fresh, marker_costs, staged=staged, reused=reused)
        excess = tokens - budget
        for selection, dropping in ((fresh, taken), (core, core_taken)):
            while dropping and excess > 0:
                number, chunk, cost = dropping.pop()
                selection[number].discard(chunk)
                excess -= max(cost, 1)
                reused = reused and dropping is not core_taken
    empty = [set[int]() for _ in placed]
    return _assembly(skeleton, base, placed, empty, empty, marker_costs, staged=staged, reused=False)


def _take(
    placed: Sequence[Placed],
    ranking: Sequence[tuple[int, int]],
    selection: list[set[int]],
    excluded: list[set[int]] | None,
    marker_costs: Sequence[int],
    available: int,
) -> list[tuple[int, int, int]]:
    """Add to ``selection`` the chunks in rank order whose cost fits; (document, chunk, cost) each."""
    taken: list[tuple[int, int, int]] = []
    for number, chunk in ranking:
        if excluded is not None and chunk in excluded[number]:
            continue
        cost = _added_cost(placed[number].index, selection[number], chunk, marker_costs[number])
        if cost <= available:
            selection[number].add(chunk)
            taken.append((number, chunk, cost))
            available -= cost
    return taken


def _assembly(
    messages: list[Message],
    tokens: int,
    placed: Sequence[Placed],
    core: list[set[int]],
    fresh: list[set[int]],
    marker_costs: Sequence[int],
    *,
    staged: bool,
    reused: bool,
) -> Assembly:
    selected = sum(len(chunks) for chunks in core) + sum(len(chunks) for chunks in fresh)
    if not staged:
        return Assembly(messages, tokens, selected, fits=True)
    kept = Kept(
        tuple(tuple(sorted(chunks)) for chunks in core), tuple(len(item.index.chunks) for item in placed)
    )
    kept_tokens = sum(
        _set_cost(item.index, chunks, cost)
        for item, chunks, cost in zip(placed, core, marker_costs, strict=True)
    )
    return Assembly(messages, tokens, selected, True, kept, reused, kept_tokens)


def _set_cost(index: DocumentIndex, selected: set[int], marker_cost: int) -> int:
    """Estimated tokens of a set of chunks as excerpts: each run's span plus its marker."""
    starts, ends = index.chunks.token_starts, index.chunks.token_ends
    return sum(int(ends[last] - starts[first]) + marker_cost for first, last in _runs(selected))


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


def _excerpts(item: Placed, selected: set[int]) -> list[str]:
    text, chunks = item.document.text, item.index.chunks
    return [
        f"{marker(first, last, item.index)}\n"
        + text[int(chunks.char_starts[first]) : int(chunks.char_ends[last])].strip()
        for first, last in _runs(selected)
    ]


def _block_text(item: Placed, core: set[int], fresh: set[int], staged: bool) -> str:
    total = item.index.chunks.total_tokens
    if staged:
        parts = [staged_note(total), KEPT_HEADER, *_excerpts(item, core), FRESH_HEADER]
    else:
        parts = [note(total)]
    parts.extend(_excerpts(item, fresh))
    tail = item.document.tail.strip()
    if tail:
        parts.append(tail)
    return "\n\n".join(parts)


def _messages(
    messages: Sequence[Message],
    placed: Sequence[Placed],
    core: list[set[int]],
    fresh: list[set[int]],
    staged: bool,
) -> list[Message]:
    result = list(messages)
    for item, kept, chosen in zip(placed, core, fresh, strict=True):
        replace_block(result, item.document.block, _block_text(item, kept, chosen, staged))
    return result
