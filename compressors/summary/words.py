"""The user's own words in a message, told from what they pasted into it, by the shape of its lines.

"Also: all timestamps are UTC ISO 8601. Here is the next log:" then 9,500 tokens of log: the message is
far over ``pin_max_tokens``, yet its first line is an instruction that every later request must keep.
So a long message is split by structure, never by keywords:

* a fenced block (a line opening with three backticks or tildes, up to the matching fence or the end)
  is pasted;
* every other line is *prose-shaped* or not. Prose-shaped: not indented (code, stack traces, a diff's
  context), not opened by ``>`` or ``|`` (quotes, tables), opening (after a list marker such as
  ``-`` or ``2.``) with a letter or a quote, of at least ``MIN_WORDS`` words, at least ``MIN_LETTERS``
  of its visible characters letters and at most ``MAX_SYMBOLS`` of them code symbols (braces,
  brackets, ``=``, ``;``, ``_``, slashes...). Log lines (a timestamp first), JSON, CSV, code and hashes
  fail it; the sentences a user types pass it;
* so is every line of a run of ``PASTE_MIN_LINES`` lines or more none of which ends a sentence
  (``.``, ``!``, ``?``, ``:``) or opens with a list marker: program output, names, log messages that
  happen to read like words (a user's hard-wrapped paragraph ends with a full stop; a list has markers);
* a run of lines that are not prose-shaped (blank lines inside it included) is *pasted* when it holds
  a fenced block, at least ``PASTE_MIN_LINES`` lines or at least ``PASTE_MIN_CHARS`` characters; a
  shorter run (a path, a command, a line of code quoted inline) stays among the user's words;
* the first line of a pasted run, when its start is prose-shaped up to a ``": "`` or a sentence's end
  and its rest is not ("Here is the log: 2024-05-01T12:00:03Z INFO ..."), is cut there: the start is
  the user's.

Everything else is the user's own words. They are quoted verbatim, in order, each pasted run replaced by
a marker saying how much was left out (the summary and the recall cover it), within ``limit`` tokens:
whole lines from both ends (where a user writes what to do with what they paste), one from each end in
turn, an end stopping at a line longer than half the limit (an article's body, a blob on one line) and
both at the limit, a marker for the middle. Beside a paste, a single line of the user's too long for
that keeps its first words. Pasted prose (an article with no structure) reads like typed prose: a
message that is all prose says so (``Words.beside_paste`` false), and ``pins`` quotes it last.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from compressors.protocols import TokenCounter

MIN_WORDS = 3
MIN_LETTERS = 0.7
MAX_SYMBOLS = 0.08
SYMBOLS = frozenset("{}[]()<>=;_\\|$#@^~&%*/")
EDGE_SHARE = 2
"""A line of the user's words longer than ``limit // EDGE_SHARE`` tokens ends what is kept from its end
(an article's body, a pasted blob on one line)."""
PASTE_MIN_LINES = 5
PASTE_MIN_CHARS = 300
FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")
LIST_MARKER = re.compile(r"(?:[-*+\u2022]|\d{1,3}[.)]|[A-Za-z][.)])\s+")
CUT = re.compile(r"[.:;!?]\s")
"""Where a line whose start is the user's sentence may go on with pasted text."""
HEAD_MAX_CHARS = 400
"""How far into a line such a start is looked for (a log line of a megabyte is not read for it)."""
OPENERS = "\"'(\u201c\u2018"
SENTENCE_ENDS = (".", "!", "?", ":", '."', ".)", "\u201d")


@dataclass(frozen=True, slots=True)
class Piece:
    text: str
    pasted: bool


def split(text: str) -> list[Piece]:
    """``text`` as runs of the user's own words and of pasted material, in order; joined with newlines
    they give ``text`` back, but for a line cut after the user's sentence (a newline more)."""
    lines = text.split("\n")
    pasted = _pasted_lines(lines)
    marked: list[tuple[str, bool]] = []
    for n, line in enumerate(lines):
        opens = pasted[n] and (n == 0 or not pasted[n - 1])
        head = _typed_head(line) if opens else 0
        if head:
            marked += [(line[:head], False), (line[head:], True)]
        else:
            marked.append((line, pasted[n]))
    pieces: list[Piece] = []
    start = 0
    for end in range(1, len(marked) + 1):
        if end == len(marked) or marked[end][1] != marked[start][1]:
            pieces.append(Piece(_join([line for line, _ in marked[start:end]]), marked[start][1]))
            start = end
    return pieces


@dataclass(frozen=True, slots=True)
class Words:
    text: str
    """The user's own words, verbatim, with markers for what was left out ("" when none)."""
    beside_paste: bool
    """Whether the message holds pasted material (else it is all prose, typed or pasted)."""


def own_words(text: str, *, limit: int, counter: TokenCounter) -> Words:
    """The user's own words of ``text`` (see the module docstring), within ``limit`` tokens."""
    pieces = split(text)
    beside_paste = any(piece.pasted for piece in pieces)
    units = _units(pieces)
    typed = [n for n, unit in enumerate(units) if not unit.pasted]
    if not typed:
        return Words("", beside_paste)
    sizes = [counter.count_text(unit.text) for unit in units]
    edge = max(1, limit // EDGE_SHARE)
    chosen: set[int] = set()
    sides = [list(typed), list(reversed(typed))]
    while any(sides):
        for side in sides:
            while side and side[0] in chosen:
                side.pop(0)
            if not side:
                continue
            number = side[0]
            if sizes[number] > edge or counter.count_text(_render(units, sizes, chosen | {number})) > limit:
                side.clear()  # this end stops at a line too long for an edge, or at the limit
                continue
            chosen.add(side.pop(0))
    if chosen:
        return Words(_render(units, sizes, chosen), beside_paste)
    if beside_paste:  # the user's words beside a paste are one long line: its first words
        return Words(_first_words(units[typed[0]].text, limit, counter), beside_paste)
    return Words("", beside_paste)


# --- lines ---------------------------------------------------------------------------------------


def prose_shaped(line: str) -> bool:
    """Whether ``line`` reads as a sentence a user typed (see the module docstring)."""
    text = line.strip()
    if not text or line[0].isspace() or text.startswith((">", "|")):
        return False
    marker = LIST_MARKER.match(text)
    body = text[marker.end() :] if marker else text
    if not body or not (body[0].isalpha() or body[0] in OPENERS):
        return False
    visible = [c for c in body if not c.isspace()]
    letters = sum(c.isalpha() for c in visible)
    symbols = sum(c in SYMBOLS for c in visible)
    return (
        len(body.split()) >= MIN_WORDS
        and letters >= MIN_LETTERS * len(visible)
        and symbols <= MAX_SYMBOLS * len(visible)
    )


def _typed_head(line: str) -> int:
    """The end of the longest prose-shaped start of ``line`` ending at a cut, when the rest is not prose
    (a long sentence may make the whole line read as prose); 0 when there is none."""
    if not line[:1].isalpha():
        return 0
    best = 0
    for found in CUT.finditer(line, 0, HEAD_MAX_CHARS):
        end = found.start() + 1
        if prose_shaped(line[:end]):
            best = end
    if best and line[best:].strip() and not prose_shaped(line[best:].lstrip()):
        return best
    return 0


def _pasted_lines(lines: Sequence[str]) -> list[bool]:
    """For each line, whether it is pasted material."""
    fenced = _fenced(lines)
    candidate = [fenced[n] or (bool(line.strip()) and not prose_shaped(line)) for n, line in enumerate(lines)]
    for run in _listings(lines):
        for n in run:
            candidate[n] = True
    pasted = [False] * len(lines)
    n = 0
    while n < len(lines):
        if not candidate[n]:
            n += 1
            continue
        end = n
        last = n  # the run's last candidate line: blank lines join it only when a candidate follows
        while end < len(lines) and (candidate[end] or not lines[end].strip()):
            if candidate[end]:
                last = end
            end += 1
        run = range(n, last + 1)
        filled = [lines[i] for i in run if lines[i].strip()]
        if (
            any(fenced[i] for i in run)
            or len(filled) >= PASTE_MIN_LINES
            or sum(len(line) for line in filled) >= PASTE_MIN_CHARS
        ):
            for i in run:
                pasted[i] = True
        n = last + 1
    return pasted


def _listings(lines: Sequence[str]) -> list[range]:
    """Runs of at least ``PASTE_MIN_LINES`` non-blank lines none of which ends a sentence or opens with a
    list marker: output, names, log messages that happen to read like words."""
    runs: list[range] = []
    start = 0
    for end in range(len(lines) + 1):
        if end < len(lines) and lines[end].strip() and not _sentence_like(lines[end]):
            continue
        if end - start >= PASTE_MIN_LINES:
            runs.append(range(start, end))
        start = end + 1
    return runs


def _sentence_like(line: str) -> bool:
    text = line.strip()
    return text.endswith(SENTENCE_ENDS) or LIST_MARKER.match(text) is not None


def _fenced(lines: Sequence[str]) -> list[bool]:
    """For each line, whether it is in a fenced block (its fences included)."""
    inside: list[bool] = []
    fence = ""
    for line in lines:
        opened = FENCE.match(line)
        if fence:
            inside.append(True)
            if opened and opened.group(1).startswith(fence) and not line[opened.end() :].strip():
                fence = ""
        elif opened:
            inside.append(True)
            fence = opened.group(1)
        else:
            inside.append(False)
    return inside


def _join(lines: Sequence[str]) -> str:
    return "\n".join(lines)


# --- the quote -----------------------------------------------------------------------------------


def _units(pieces: Sequence[Piece]) -> list[Piece]:
    """The pieces with the user's words split into lines, each with the blank lines before it."""
    units: list[Piece] = []
    for piece in pieces:
        if piece.pasted:
            units.append(piece)
            continue
        blank = 0
        for line in piece.text.split("\n"):
            if not line.strip():
                blank += 1
                continue
            units.append(Piece("\n" * blank + line, pasted=False))
            blank = 0
    return units


def _render(units: Sequence[Piece], sizes: Sequence[int], chosen: set[int]) -> str:
    """The chosen lines verbatim, in order (with the blank lines between two of them); each run of the
    units left out between them one marker."""
    out = ""
    gap: list[int] = []
    follows = False  # the unit before was chosen
    for number, unit in enumerate(units):
        if number not in chosen:
            gap.append(number)
            follows = False
            continue
        if gap and out:
            out += "\n" + _marker(units, sizes, gap)
        elif gap:
            out = _marker(units, sizes, gap)
        gap = []
        line = unit.text if follows else unit.text.lstrip("\n")
        out = f"{out}\n{line}" if out else line
        follows = True
    if gap and out:
        out += "\n" + _marker(units, sizes, gap)
    return out


def _marker(units: Sequence[Piece], sizes: Sequence[int], gap: Iterable[int]) -> str:
    left = list(gap)
    tokens = sum(sizes[n] for n in left)
    what = "pasted material" if all(units[n].pasted for n in left) else "this message"
    return f"[\u2026 {tokens:,} tokens of {what} left out by the gateway \u2026]"


def _first_words(text: str, limit: int, counter: TokenCounter) -> str:
    """The longest run of ``text``'s first words that fits in ``limit`` tokens with a marker after it."""
    words = text.strip().split(" ")
    total = counter.count_text(text)
    low, high = 0, len(words)
    best = ""
    while low < high:
        middle = (low + high + 1) // 2
        head = " ".join(words[:middle])
        left = total - counter.count_text(head)
        trial = f"{head}\n[\u2026 {left:,} tokens of this message left out by the gateway \u2026]"
        if counter.count_text(trial) <= limit:
            best, low = trial, middle
        else:
            high = middle - 1
    return best
