"""Cutting a document into chunks of ``chunk_min``..``chunk_max`` tokens on natural boundaries.

The document is first split by structure into pieces, each counted once, each no larger than
``chunk_max``: fenced code blocks (kept whole when they fit) and paragraphs (split at blank lines and
before Markdown headings); a piece that is too large is split at line breaks, then at sentence ends
(``.!?`` before whitespace, the ideographic full stop and full-width ``!?`` anywhere), then at the
whitespace nearest to an even cut, then anywhere. A span longer than ``8 * chunk_max`` characters
is split before it is counted, so a large document is tokenised about once. Cuts fall where the
encoder itself starts a token (after a line break, before the space that follows a full stop), so
the pieces' counts add up to the document's.

Pieces are then grouped greedily: a chunk takes pieces while it stays within ``chunk_max`` and ends,
among the cuts that leave it at least ``chunk_min``, at the strongest boundary (heading > blank line >
line break > sentence end > word > anywhere), the latest one on a tie. Each chunk after the first also
starts up to ``overlap`` tokens earlier (at a sentence or word start), repeating the end of the previous
one. Token positions are exact at piece boundaries and estimated inside the overlap.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from itertools import pairwise

import numpy as np
import numpy.typing as npt

from compressors.protocols import TokenCounter

HEADING, PARAGRAPH, LINE, SENTENCE, WORD, ANYWHERE = 5, 4, 3, 2, 1, 0
"""Strengths of the boundary after a piece."""

_FENCE = re.compile(r"^[ \t]*```[^\n]*\n.*?^[ \t]*```[ \t]*(?:\n|\Z)", re.MULTILINE | re.DOTALL)
_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n[ \t\n]*|\n(?=#{1,6}[ \t])")
_HEADING_START = re.compile(r"#{1,6}[ \t]")
_LINE_BREAK = re.compile(r"\n")
_CLOSERS = "\"')\\]\u201d\u2019"
_CJK_ENDS = "\u3002\uff01\uff1f"  # ideographic full stop, full-width exclamation and question marks
_CJK_CLOSERS = "\u300d\u300f\uff09\u201d\u2019"
_SENTENCE_END = re.compile(f"[.!?][{_CLOSERS}]*(?=\\s)|[{_CJK_ENDS}][{_CJK_CLOSERS}]*")
_SPACE = re.compile(r"\s")
_COUNT_CHARS_PER_MAX_TOKEN = 8


@dataclass(frozen=True, slots=True)
class Chunks:
    """Where a document's chunks lie: parallel int64 arrays, one entry per chunk, in document order.

    ``char_starts`` includes the overlap; ``char_ends[i]`` is where chunk ``i + 1``'s own text begins.
    """

    char_starts: npt.NDArray[np.int64]
    char_ends: npt.NDArray[np.int64]
    token_starts: npt.NDArray[np.int64]
    token_ends: npt.NDArray[np.int64]
    total_tokens: int
    byte_starts: npt.NDArray[np.int64]
    """``char_starts`` as offsets in the document's UTF-8 bytes (and ``byte_ends`` likewise)."""
    byte_ends: npt.NDArray[np.int64]

    def __len__(self) -> int:
        return len(self.char_starts)

    def text(self, document: str, index: int) -> str:
        return document[int(self.char_starts[index]) : int(self.char_ends[index])]

    def texts(self, document: str) -> list[str]:
        return [
            document[start:end]
            for start, end in zip(self.char_starts.tolist(), self.char_ends.tolist(), strict=True)
        ]


@dataclass(slots=True)
class _Pieces:
    starts: list[int]
    ends: list[int]
    tokens: list[int]
    strengths: list[int]


class _Segmenter:
    """Splits a document into counted pieces of at most ``chunk_max`` tokens."""

    def __init__(self, text: str, counter: TokenCounter, chunk_max: int, hard_target: int) -> None:
        self.text = text
        self.counter = counter
        self.chunk_max = chunk_max
        self.hard_target = hard_target
        self.count_limit = _COUNT_CHARS_PER_MAX_TOKEN * chunk_max
        self.pieces = _Pieces([], [], [], [])

    def run(self) -> _Pieces:
        text = self.text
        position = 0
        if "```" in text:
            for fence in _FENCE.finditer(text):
                self._prose(position, fence.start())
                self._span(fence.start(), fence.end(), PARAGRAPH, LINE)
                position = fence.end()
        self._prose(position, len(text))
        return self.pieces

    def _prose(self, start: int, end: int) -> None:
        text = self.text
        position = start
        for found in _PARAGRAPH_BREAK.finditer(text, start, end):
            cut = found.end()
            strength = HEADING if _HEADING_START.match(text, cut) else PARAGRAPH
            self._span(position, cut, strength, LINE)
            position = cut
        if position < end:
            self._span(position, end, PARAGRAPH, LINE)

    def _span(self, start: int, end: int, strength: int, level: int) -> None:
        tokens: int | None = None
        if end - start <= self.count_limit:
            tokens = self.counter.count_text(self.text[start:end])
            if tokens <= self.chunk_max:
                self._add(start, end, tokens, strength)
                return
        if level == LINE:
            cuts = [(found.end(), LINE) for found in _LINE_BREAK.finditer(self.text, start, end)]
        elif level == SENTENCE:
            cuts = [(found.end(), SENTENCE) for found in _SENTENCE_END.finditer(self.text, start, end)]
        else:
            cuts = self._hard_cuts(start, end, tokens)
        cuts = [(cut, kind) for cut, kind in cuts if start < cut < end]
        if not cuts and level > WORD:
            self._span(start, end, strength, level - 1)
            return
        if not cuts:
            counted = tokens if tokens is not None else self.counter.count_text(self.text[start:end])
            self._add(start, end, counted, strength)
            return
        position = start
        for cut, kind in cuts:
            self._span(position, cut, kind, max(level - 1, WORD))
            position = cut
        self._span(position, end, strength, max(level - 1, WORD))

    def _hard_cuts(self, start: int, end: int, tokens: int | None) -> list[tuple[int, int]]:
        length = end - start
        parts = (
            math.ceil(tokens / self.hard_target)
            if tokens is not None
            else math.ceil(length / (2 * self.chunk_max))
        )
        parts = max(parts, 2)
        step = length / parts
        cuts = []
        for part in range(1, parts):
            target = start + round(part * step)
            space = self.text.rfind(" ", target - int(step / 4), target)
            cuts.append((space, WORD) if space > start else (target, ANYWHERE))
        return sorted(set(cuts))

    def _add(self, start: int, end: int, tokens: int, strength: int) -> None:
        pieces = self.pieces
        pieces.starts.append(start)
        pieces.ends.append(end)
        pieces.tokens.append(tokens)
        pieces.strengths.append(strength)


def chunk(text: str, counter: TokenCounter, *, chunk_min: int, chunk_max: int, overlap: int) -> Chunks:
    """Cut ``text`` into chunks; see the module docstring for the rules."""
    pieces = _Segmenter(text, counter, chunk_max, (chunk_min + chunk_max) // 2).run()
    if not pieces.starts:
        empty = np.zeros(0, dtype=np.int64)
        return Chunks(empty, empty, empty, empty, 0, empty, empty)
    cumulative = np.zeros(len(pieces.tokens) + 1, dtype=np.int64)
    np.cumsum(pieces.tokens, out=cumulative[1:])
    bounds = _group(cumulative, np.asarray(pieces.strengths, dtype=np.int8), chunk_min, chunk_max)
    starts = np.asarray(pieces.starts, dtype=np.int64)
    ends = np.asarray(pieces.ends, dtype=np.int64)
    first = np.asarray(bounds[:-1], dtype=np.int64)
    last = np.asarray(bounds[1:], dtype=np.int64) - 1
    char_starts = starts[first]
    char_ends = ends[last]
    token_starts = cumulative[first]
    token_ends = cumulative[last + 1]
    if overlap:
        char_starts, token_starts = _with_overlap(
            text, char_starts, char_ends, token_starts, token_ends, overlap
        )
    byte_starts, byte_ends = _byte_offsets(text, char_starts, char_ends)
    return Chunks(
        char_starts, char_ends, token_starts, token_ends, int(cumulative[-1]), byte_starts, byte_ends
    )


def _byte_offsets(
    text: str, starts: npt.NDArray[np.int64], ends: npt.NDArray[np.int64]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """The same positions in the UTF-8 encoding of ``text`` (each stretch between two is encoded once)."""
    if text.isascii():
        return starts.copy(), ends.copy()
    positions = np.unique(np.concatenate([starts, ends]))
    edges = [0, *positions.tolist()]
    lengths = [len(text[a:b].encode("utf-8", "surrogatepass")) for a, b in pairwise(edges)]
    offsets = np.cumsum(lengths, dtype=np.int64)
    return offsets[np.searchsorted(positions, starts)], offsets[np.searchsorted(positions, ends)]


def _group(
    cumulative: npt.NDArray[np.int64], strengths: npt.NDArray[np.int8], low: int, high: int
) -> list[int]:
    """Piece indices where chunks begin, plus the number of pieces at the end."""
    count = len(strengths)
    bounds = [0]
    first = 0
    while first < count:
        base = int(cumulative[first])
        furthest = max(int(np.searchsorted(cumulative, base + high, side="right")) - 1, first + 1)
        if furthest >= count:
            bounds.append(count)
            break
        nearest = max(int(np.searchsorted(cumulative, base + low, side="left")), first + 1)
        if nearest > furthest:
            end = furthest
        else:
            window = strengths[nearest - 1 : furthest]
            end = furthest - int(np.argmax(window[::-1]))
        bounds.append(end)
        first = end
    return bounds


def _with_overlap(
    text: str,
    char_starts: npt.NDArray[np.int64],
    char_ends: npt.NDArray[np.int64],
    token_starts: npt.NDArray[np.int64],
    token_ends: npt.NDArray[np.int64],
    overlap: int,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    new_chars = char_starts.copy()
    new_tokens = token_starts.copy()
    for index in range(1, len(char_starts)):
        own_start = int(char_starts[index])
        previous_start = int(char_starts[index - 1])
        chars_per_token = (own_start - previous_start) / max(
            int(token_ends[index - 1] - token_starts[index - 1]), 1
        )
        earliest = max(previous_start, own_start - int(overlap * chars_per_token))
        found = _SENTENCE_END.search(text, earliest, own_start)
        start = found.end() if found else earliest
        if not found and (space := _SPACE.search(text, earliest, own_start)):
            start = space.start()
        if start < own_start:
            new_chars[index] = start
            new_tokens[index] = max(
                int(token_starts[index]) - round((own_start - start) / chars_per_token), 0
            )
    return new_chars, new_tokens
