from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

from compressors.retrieval.chunking import Chunks, chunk
from tests.fixtures.haystack import ProseGenerator, TiktokenCounter, cjk_paragraph, o200k_encoding


@pytest.fixture(scope="module")
def counter() -> TiktokenCounter:
    return TiktokenCounter(o200k_encoding())


@dataclass
class TallyCounter:
    """Counts like ``inner`` and remembers how many characters it was asked to count."""

    inner: TiktokenCounter
    characters: int = 0
    calls: list[int] = field(default_factory=list)

    def count_text(self, text: str) -> int:
        self.characters += len(text)
        self.calls.append(len(text))
        return self.inner.count_text(text)

    def count_messages(self, messages: Sequence[dict[str, Any]]) -> int:
        return self.inner.count_messages(messages)

    def encode(self, text: str) -> list[int]:
        return self.inner.encode(text)

    def decode(self, tokens: Sequence[int]) -> str:
        return self.inner.decode(tokens)


def _prose(paragraphs: int, seed: int = 1) -> str:
    generator = ProseGenerator(seed)
    return "\n\n".join(generator.paragraph() for _ in range(paragraphs))


def _own_sizes(chunks: Chunks) -> list[int]:
    """Tokens of each chunk without its overlap."""
    own_starts = [0, *chunks.token_ends[:-1].tolist()]
    return [int(end) - start for start, end in zip(own_starts, chunks.token_ends.tolist(), strict=True)]


def _assert_tiles(text: str, chunks: Chunks) -> None:
    """Chunks cover the text in order; each one's own text starts where the previous one ended."""
    assert int(chunks.char_starts[0]) == 0
    assert int(chunks.char_ends[-1]) == len(text)
    for index in range(1, len(chunks)):
        assert chunks.char_starts[index - 1] <= chunks.char_starts[index] <= chunks.char_ends[index - 1]
        assert chunks.token_starts[index] <= chunks.token_ends[index - 1]
        assert chunks.token_ends[index] > chunks.token_ends[index - 1]


def test_chunk_sizes_stay_within_bounds(counter: TiktokenCounter) -> None:
    text = _prose(400)
    chunks = chunk(text, counter, chunk_min=500, chunk_max=800, overlap=50)
    sizes = _own_sizes(chunks)
    assert len(chunks) > 20
    assert all(500 <= size <= 800 for size in sizes[:-1])
    assert 0 < sizes[-1] <= 800
    _assert_tiles(text, chunks)


def test_chunk_token_positions_add_up_to_the_document(counter: TiktokenCounter) -> None:
    text = _prose(300, seed=7)
    chunks = chunk(text, counter, chunk_min=500, chunk_max=800, overlap=50)
    assert chunks.total_tokens == counter.count_text(text)
    assert int(chunks.token_ends[-1]) == chunks.total_tokens
    for index in (0, 5, len(chunks) - 1):
        own_start = 0 if index == 0 else int(chunks.token_ends[index - 1])
        own_text = text[0 if index == 0 else int(chunks.char_ends[index - 1]) : int(chunks.char_ends[index])]
        assert abs(counter.count_text(own_text) - (int(chunks.token_ends[index]) - own_start)) <= 2


def test_chunk_counts_each_character_about_once(counter: TiktokenCounter) -> None:
    tally = TallyCounter(counter)
    text = _prose(600, seed=3) + "\n\n" + " ".join(["word"] * 30_000) + "\n\n" + "x" * 40_000
    chunk(text, tally, chunk_min=500, chunk_max=800, overlap=50)
    assert tally.characters <= 1.25 * len(text)


def test_chunk_ends_at_paragraph_breaks_when_paragraphs_fit(counter: TiktokenCounter) -> None:
    text = _prose(300, seed=5)
    chunks = chunk(text, counter, chunk_min=500, chunk_max=800, overlap=0)
    for end in chunks.char_ends[:-1].tolist():
        assert text[:end].endswith("\n\n")


def test_chunk_without_overlap_starts_where_the_previous_ends(counter: TiktokenCounter) -> None:
    text = _prose(120)
    chunks = chunk(text, counter, chunk_min=500, chunk_max=800, overlap=0)
    assert chunks.char_starts[1:].tolist() == chunks.char_ends[:-1].tolist()
    assert chunks.token_starts[1:].tolist() == chunks.token_ends[:-1].tolist()


def test_chunk_overlap_repeats_a_sentence_or_word_start(counter: TiktokenCounter) -> None:
    text = _prose(200, seed=11)
    chunks = chunk(text, counter, chunk_min=500, chunk_max=800, overlap=50)
    overlapped = 0
    for index in range(1, len(chunks)):
        start, own_start = int(chunks.char_starts[index]), int(chunks.char_ends[index - 1])
        if start < own_start:
            overlapped += 1
            repeated = counter.count_text(text[start:own_start])
            assert repeated <= 70
            assert text[start].isspace()
    assert overlapped >= len(chunks) // 2


def test_chunk_prefers_cutting_before_headings(counter: TiktokenCounter) -> None:
    generator = ProseGenerator(2)
    sections = []
    for number in range(40):
        body = ""
        while counter.count_text(body) < 560:
            body += generator.sentence() + " "
        sections.append(f"## Section {number}\n\n{body.strip()}")
    text = "\n\n".join(sections)
    chunks = chunk(text, counter, chunk_min=500, chunk_max=800, overlap=0)
    for start in chunks.char_starts[1:].tolist():
        assert text[start:].startswith("## Section")


def test_chunk_keeps_code_fences_whole(counter: TiktokenCounter) -> None:
    generator = ProseGenerator(4)
    code = "```python\n" + "\n".join(f"value_{n} = compute({n}) + {n * 7}\n" for n in range(25)) + "```\n"
    parts = []
    for _ in range(30):
        parts.append(generator.paragraph())
        parts.append(code)
    text = "\n\n".join(parts)
    chunks = chunk(text, counter, chunk_min=500, chunk_max=800, overlap=0)
    fences = [(found.start(), found.end()) for found in re.finditer(r"```python\n.*?```\n", text, re.DOTALL)]
    assert len(fences) == 30
    for cut in chunks.char_ends[:-1].tolist():
        assert not any(start < cut < end for start, end in fences)


def test_chunk_splits_a_fence_larger_than_a_chunk_at_line_breaks(counter: TiktokenCounter) -> None:
    code = (
        "```\n" + "".join(f"line {n}: some_function(argument_{n}, other={n})\n" for n in range(600)) + "```\n"
    )
    chunks = chunk(code, counter, chunk_min=500, chunk_max=800, overlap=0)
    assert len(chunks) > 3
    assert all(size <= 800 for size in _own_sizes(chunks))
    for cut in chunks.char_ends[:-1].tolist():
        assert code[cut - 1] == "\n"


def test_chunk_cuts_unspaced_text_at_sentence_punctuation(counter: TiktokenCounter) -> None:
    rng = random.Random(9)
    text = "".join(cjk_paragraph(rng) for _ in range(600))
    chunks = chunk(text, counter, chunk_min=500, chunk_max=800, overlap=0)
    assert len(chunks) > 5
    assert all(size <= 800 for size in _own_sizes(chunks))
    for cut in chunks.char_ends[:-1].tolist():
        assert text[cut - 1] in "\u3002\uff01\uff1f"


@pytest.mark.parametrize(
    "text",
    [
        "x" * 60_000,
        "abc123" * 9_000,
        " ".join(["alpha"] * 12_000),
        "\u4e2d" * 20_000,
        "\n".join(["short line"] * 5_000),
    ],
    ids=["one-char-run", "no-break", "words", "cjk-run", "lines"],
)
def test_chunk_bounds_text_without_natural_breaks(counter: TiktokenCounter, text: str) -> None:
    chunks = chunk(text, counter, chunk_min=500, chunk_max=800, overlap=50)
    assert all(size <= 800 for size in _own_sizes(chunks))
    assert abs(chunks.total_tokens - counter.count_text(text)) <= 0.02 * chunks.total_tokens
    _assert_tiles(text, chunks)


def test_chunk_of_empty_text_is_empty(counter: TiktokenCounter) -> None:
    chunks = chunk("", counter, chunk_min=500, chunk_max=800, overlap=50)
    assert len(chunks) == 0
    assert chunks.total_tokens == 0


def test_chunk_short_text_is_one_chunk(counter: TiktokenCounter) -> None:
    text = "A short note.\n\nWith two paragraphs."
    chunks = chunk(text, counter, chunk_min=500, chunk_max=800, overlap=50)
    assert len(chunks) == 1
    assert chunks.text(text, 0) == text
    assert chunks.texts(text) == [text]
    assert np.array_equal(chunks.token_starts, [0])


def test_chunk_byte_offsets_point_at_the_same_text(counter: TiktokenCounter) -> None:
    rng = random.Random(3)
    text = "\n\n".join(f"{cjk_paragraph(rng)} Krak\u00f3w caf\u00e9 {_prose(1, seed=n)}" for n in range(200))
    data = text.encode()
    chunks = chunk(text, counter, chunk_min=500, chunk_max=800, overlap=50)
    assert len(chunks) > 10
    for index in range(len(chunks)):
        piece = data[int(chunks.byte_starts[index]) : int(chunks.byte_ends[index])]
        assert piece.decode() == chunks.text(text, index)
    ascii_text = _prose(50).encode("ascii", "replace").decode()
    ascii_chunks = chunk(ascii_text, counter, chunk_min=500, chunk_max=800, overlap=50)
    assert np.array_equal(ascii_chunks.byte_starts, ascii_chunks.char_starts)
