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
a marker saying how much was left out (the summary and the recall cover it). Pasted prose (an article
with no structure) reads like typed prose; so the own words of a message are kept within ``limit``
tokens: when they are over it, whole paragraphs from both ends (where a user writes what to do with
what they paste), the first first, and a marker for the middle. A first paragraph alone over the limit
keeps its first words.
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


def own_words(text: str, *, limit: int, counter: TokenCounter) -> str:
    """The user's own words of ``text`` (see the module docstring), within ``limit`` tokens; "" when it
    has none."""
    units = _units(split(text))
    typed = [n for n, unit in enumerate(units) if not unit.pasted and unit.text.strip()]
    if not typed:
        return ""
    sizes = [counter.count_text(unit.text) for unit in units]
    chosen: set[int] = set()
    for number in _from_both_ends(typed):
        if counter.count_text(_render(units, sizes, chosen | {number})) > limit:
            break  # what is kept stays whole paragraphs at both ends, the middle left out
        chosen.add(number)
    if chosen:
        return _render(units, sizes, chosen)
    return _first_words(units[typed[0]].text, limit, counter)


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
    """The pieces with the user's words split into paragraphs (at blank lines), the units kept whole."""
    units: list[Piece] = []
    for piece in pieces:
        if piece.pasted:
            units.append(piece)
            continue
        for paragraph in re.split(r"\n[ \t]*\n", piece.text):
            units.append(Piece(paragraph, pasted=False))
    return units


def _from_both_ends(numbers: Sequence[int]) -> list[int]:
    """``numbers`` taken alternately from the front and the back: 1, 9, 2, 8, ..."""
    order: list[int] = []
    front, back = 0, len(numbers) - 1
    while front <= back:
        order.append(numbers[front])
        if back != front:
            order.append(numbers[back])
        front, back = front + 1, back - 1
    return order


def _render(units: Sequence[Piece], sizes: Sequence[int], chosen: set[int]) -> str:
    """The chosen units verbatim, in order (paragraphs next to each other a blank line apart); each run
    of the units left out between them one marker."""
    parts: list[str] = []
    gap: list[int] = []
    last = -2
    for number, unit in enumerate(units):
        if number not in chosen:
            if unit.text.strip():
                gap.append(number)
            continue
        if gap:
            parts += ["\n", _marker(units, sizes, gap), "\n"]
            gap = []
        elif parts:
            parts.append("\n\n" if last == number - 1 else "\n")
        parts.append(unit.text.strip("\n"))
        last = number
    if gap and parts:
        parts += ["\n", _marker(units, sizes, gap)]
    return "".join(parts)


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
