"""The BM25 tokenizer: lower-cased words for spaced scripts, character bigrams for unspaced ones.

Words are runs of letters and digits (``_`` and punctuation separate them, so ``max_tokens`` is two
words and ``X-3391`` is ``x`` and ``3391``). Runs of Han, Hiragana, Katakana, Hangul, Thai, Lao,
Myanmar and Khmer characters have no spaces between words, so such a run becomes its overlapping
character bigrams (a single character stays a unigram), as Lucene's CJK analyzer does. A few very
common English words are dropped.

Terms are ``bytes`` (UTF-8), which keeps the work in C: the text is encoded once, ASCII letters are
lower-cased and ASCII punctuation turned into spaces by ``bytes.lower`` and ``bytes.translate``, and
the result is split. Text with other characters first has its non-ASCII punctuation made spaces:
per run of non-ASCII bytes when it has no unspaced script, else on an array of its code points, where
unspaced runs also become bigrams (one per character) without a loop in Python.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from itertools import pairwise

import numpy as np

_ASCII_WORD_BYTES = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
_SEPARATE_ASCII = bytes(byte if byte >= 0x80 or byte in _ASCII_WORD_BYTES else 0x20 for byte in range(256))

_SEPARATOR_RANGES = (
    (0x0080, 0x00BF),  # C1 controls, Latin-1 punctuation and signs: guillemets, degree, ...
    (0x00D7, 0x00D7),  # multiplication sign
    (0x00F7, 0x00F7),  # division sign
    (0x1680, 0x1680),  # Ogham space
    (0x180E, 0x180E),  # Mongolian vowel separator
    (0x2000, 0x206F),  # general punctuation: dashes, curly quotes, ellipsis, bullets
    (0x2190, 0x2BFF),  # arrows, mathematical operators, box drawing, shapes, dingbats
    (0x2E00, 0x2E7F),  # supplemental punctuation
    (0x3000, 0x303F),  # CJK symbols and punctuation: ideographic comma and full stop, corner brackets
    (0xFE30, 0xFE6F),  # CJK compatibility forms, small forms
    (0xFEFF, 0xFEFF),  # zero-width no-break space
    (0xFF00, 0xFF0F),  # full-width punctuation ...
    (0xFF1A, 0xFF20),
    (0xFF3B, 0xFF40),
    (0xFF5B, 0xFF65),
    (0x1F000, 0x1FAFF),  # emoji and pictographs
)
_UNSPACED_RANGES = (
    (0x0E00, 0x0EFF),  # Thai, Lao
    (0x1000, 0x109F),  # Myanmar
    (0x1780, 0x17FF),  # Khmer
    (0x3040, 0x30FF),  # Hiragana, Katakana
    (0x31F0, 0x31FF),  # Katakana extensions
    (0x3400, 0x4DBF),  # Han extension A
    (0x4E00, 0x9FFF),  # Han
    (0xAC00, 0xD7AF),  # Hangul syllables
    (0xF900, 0xFAFF),  # Han compatibility
    (0xFF66, 0xFF9F),  # half-width Katakana
    (0x20000, 0x2FA1F),  # Han extensions B and later
)
_UNSPACED_LEAD_BYTES = tuple(bytes([lead]) for lead in (0xE0, 0xE1, *range(0xE3, 0xEE), 0xEF, 0xF0))
"""UTF-8 lead bytes of every unspaced character (and of some others): without them, none is there."""


def _character_class(ranges: tuple[tuple[int, int], ...]) -> str:
    return "[" + "".join(f"{chr(low)}-{chr(high)}" for low, high in ranges) + "]"


_NON_ASCII_SEPARATORS = re.compile(_character_class(_SEPARATOR_RANGES) + "+")
_UNSPACED_RUN = re.compile(_character_class(_UNSPACED_RANGES) + "+")

_KEEP, _SEPARATOR, _UNSPACED = 0, 1, 2
_KIND_RANGES = sorted(
    [(*r, _SEPARATOR) for r in _SEPARATOR_RANGES] + [(*r, _UNSPACED) for r in _UNSPACED_RANGES]
)
_BOUNDS = np.array([edge for low, high, _ in _KIND_RANGES for edge in (low, high + 1)], dtype=np.uint32)
_KINDS = np.array([_KEEP, *(k for _, _, kind in _KIND_RANGES for k in (kind, _KEEP))], dtype=np.uint8)
_SKIP = np.uint32(0xFFFFFFFF)
_SPACE = np.uint32(0x20)

STOP_WORDS = frozenset(
    b"a an and are as at be but by do does did for from has have had how i if in into is it its me my no "
    b"not of on or our so such than that the their them then there these they this to was were what when "
    b"where which who why will with would you your".split()
)


_NON_ASCII_RUN = re.compile(rb"[\x80-\xff]+")


def words(text: str) -> list[bytes]:
    """The BM25 terms of ``text``, in order, stop-words included."""
    data = text.encode("utf-8", "surrogatepass")
    if text.isascii():
        return data.lower().translate(_SEPARATE_ASCII).split()
    if any(lead in data for lead in _UNSPACED_LEAD_BYTES):
        data = _by_code_point(text)
    else:
        data = _NON_ASCII_RUN.sub(_spaced_non_ascii, data.lower())
    return data.translate(_SEPARATE_ASCII).split()


def _spaced_non_ascii(match: re.Match[bytes]) -> bytes:
    run = match.group().decode("utf-8", "replace").lower()
    return _NON_ASCII_SEPARATORS.sub(" ", run).encode("utf-8")


def _by_code_point(text: str) -> bytes:
    """Lower-cased UTF-8 of ``text`` with separators made spaces and unspaced runs made bigrams,
    computed on an array of code points (a bigram per character, without a Python loop)."""
    codes = np.frombuffer(text.lower().encode("utf-32-le", "surrogatepass"), dtype="<u4")
    kinds = _KINDS[np.searchsorted(_BOUNDS, codes, side="right")]
    unspaced = kinds == _UNSPACED
    codes = np.where(kinds == _SEPARATOR, _SPACE, codes)
    following = np.zeros_like(unspaced)
    following[:-1] = unspaced[1:]
    preceding = np.zeros_like(unspaced)
    preceding[1:] = unspaced[:-1]
    pairs, single = unspaced & following, unspaced & ~following & ~preceding
    after = np.full_like(codes, _SKIP)
    after[:-1] = codes[1:]
    cells = np.empty((len(codes), 4), dtype="<u4")  # per character: what it writes, in four slots
    cells[:, 0] = np.where(unspaced, np.where((pairs & ~preceding) | single, _SPACE, _SKIP), codes)
    cells[:, 1] = np.where(pairs | single, codes, _SKIP)
    cells[:, 2] = np.where(pairs, after, np.where(single, _SPACE, _SKIP))
    cells[:, 3] = np.where(pairs, _SPACE, _SKIP)
    flat = cells.ravel()
    kept: str = flat[flat != _SKIP].tobytes().decode("utf-32-le", "surrogatepass")
    return kept.encode("utf-8", "surrogatepass")


def terms(text: str) -> list[bytes]:
    """The BM25 terms of ``text`` without stop-words."""
    return [word for word in words(text) if word not in STOP_WORDS]


@dataclass(frozen=True, slots=True)
class Phrase:
    """Two consecutive terms of a question (stop-words between them skipped) and the question's own
    lower-cased text from the first to the second, whitespace runs made single spaces."""

    first: bytes
    second: bytes
    text: str


def phrases(question: str) -> list[Phrase]:
    """The phrases of ``question``: in "the secret code for the blue lighthouse", ``secret code``,
    ``code for the blue`` and ``blue lighthouse``; in an unspaced run, each three characters."""
    lowered = question.lower()
    spans: list[tuple[bytes, int, int]] = []
    position = 0
    for word in words(question):
        text = word.decode("utf-8", "replace")
        start = lowered.find(text, position)
        if start < 0:
            continue
        spans.append((word, start, start + len(text)))
        position = start + 1 if _UNSPACED_RUN.fullmatch(text) else start + len(text)
    content = [span for span in spans if span[0] not in STOP_WORDS]
    return [
        Phrase(first, second, " ".join(lowered[start:end].split()))
        for (first, start, _), (second, _, end) in pairwise(content)
        if first != second
    ]
