from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from compressors.retrieval.assembly import FRESH_HEADER, Placed, assemble, marker, note
from compressors.retrieval.chunking import Chunks
from compressors.retrieval.documents import Block, Document
from compressors.retrieval.index import DocumentIndex, build_index
from compressors.retrieval.ranking import LexicalIndex
from compressors.retrieval.settings import RetrievalSettings
from tests.fixtures.haystack import TiktokenCounter, build_haystack, o200k_encoding


@pytest.fixture(scope="module")
def counter() -> TiktokenCounter:
    return TiktokenCounter(o200k_encoding())


@pytest.fixture(scope="module")
def document(counter: TiktokenCounter) -> tuple[str, DocumentIndex]:
    text = build_haystack(tokens=40_000, counter=counter, seed=21)
    return text, build_index(text, counter, RetrievalSettings())


@dataclass(frozen=True)
class Overcounting:
    """Counts messages with excerpts ``extra`` tokens higher than they are, to force trimming."""

    inner: TiktokenCounter
    extra: int

    def count_text(self, text: str) -> int:
        return self.inner.count_text(text)

    def count_messages(self, messages: Sequence[dict[str, Any]]) -> int:
        extra = self.extra if any("[excerpt" in str(m.get("content")) for m in messages) else 0
        return self.inner.count_messages(messages) + extra

    def encode(self, text: str) -> list[int]:
        return self.inner.encode(text)

    def decode(self, tokens: Sequence[int]) -> str:
        return self.inner.decode(tokens)


def _messages(text: str, question: str = "Who kept the notes?") -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": "You answer from the document."},
        {"role": "user", "content": text},
        {"role": "assistant", "content": "I have read it."},
        {"role": "user", "content": question},
    ]


def _placed(messages: list[dict[str, Any]], index: DocumentIndex, number: int = 1) -> Placed:
    text = messages[number]["content"]
    return Placed(Document(Block(number, None, "user", text), len(text)), index)


def test_marker_names_the_chunks_and_their_token_range() -> None:
    count = 812
    starts = np.arange(count, dtype=np.int64) * 600
    chunks = Chunks(starts, starts + 600, starts, starts + 600, 600_000, starts, starts + 600)
    chunks.token_starts[16], chunks.token_ends[16], chunks.token_ends[18] = 10_200, 10_800, 12_100
    index = DocumentIndex(chunks, LexicalIndex.build([]))
    assert marker(16, 16, index) == "[excerpt 17/812, ~tokens 10,200\u201310,800 of 600,000]"
    assert marker(16, 18, index) == "[excerpts 17\u201319/812, ~tokens 10,200\u201312,100 of 600,000]"
    assert "600,000 tokens" in note(600_000) and "excerpted for relevance" in note(600_000)


def test_assemble_merges_neighbours_in_document_order(
    counter: TiktokenCounter, document: tuple[str, DocumentIndex]
) -> None:
    text, index = document
    messages = _messages(text)
    chunks = index.chunks
    ranking = [(0, 11), (0, 3), (0, 10), (0, 4), (0, 7)]
    result = assemble(messages, [_placed(messages, index)], ranking, counter=counter, budget=20_000)
    content = result.messages[1]["content"]
    assert result.fits and result.selected == 5
    assert content.startswith(note(chunks.total_tokens))
    markers = [marker(3, 4, index), marker(7, 7, index), marker(10, 11, index)]
    positions = [content.index(m) for m in markers]
    assert positions == sorted(positions)
    assert content.count("[excerpt") == 3
    merged = text[int(chunks.char_starts[3]) : int(chunks.char_ends[4])].strip()
    assert f"{markers[0]}\n{merged}" in content
    overlap = text[int(chunks.char_starts[4]) : int(chunks.char_ends[3])]
    assert overlap.strip() and content.count(overlap.strip()) == 1
    assert result.messages[0] is messages[0] and result.messages[2] is messages[2]
    assert result.messages[3] is messages[3]
    assert result.tokens == counter.count_messages(result.messages)


@pytest.mark.parametrize("budget", [900, 1_500, 2_400, 3_000, 5_000, 8_000, 13_000, 21_000, 34_000])
def test_assemble_stays_within_budget_and_fills_it(
    counter: TiktokenCounter, document: tuple[str, DocumentIndex], budget: int
) -> None:
    text, index = document
    messages = _messages(text)
    ranking = [(0, number) for number in range(len(index.chunks))]
    random.Random(budget).shuffle(ranking)
    result = assemble(messages, [_placed(messages, index)], ranking, counter=counter, budget=budget)
    assert result.fits
    assert result.tokens == counter.count_messages(result.messages) <= budget
    largest = int(np.max(index.chunks.token_ends - index.chunks.token_starts))
    assert budget - result.tokens < largest + 60 + budget // 100


def test_assemble_trims_the_lowest_ranked_chunks_when_the_count_is_higher_than_estimated(
    counter: TiktokenCounter, document: tuple[str, DocumentIndex]
) -> None:
    text, index = document
    messages = _messages(text)
    ranking = [(0, number) for number in (5, 1, 9, 14, 2, 20, 30)]
    honest = assemble(messages, [_placed(messages, index)], ranking, counter=counter, budget=6_000)
    lying = Overcounting(counter, 1_500)
    trimmed = assemble(messages, [_placed(messages, index)], ranking, counter=lying, budget=6_000)
    assert trimmed.fits
    assert trimmed.tokens == lying.count_messages(trimmed.messages) <= 6_000
    assert trimmed.selected < honest.selected
    kept = trimmed.messages[1]["content"]
    assert marker(5, 5, index) in kept
    assert marker(30, 30, index) not in kept


def test_assemble_reports_no_room_when_kept_messages_exceed_the_budget(
    counter: TiktokenCounter, document: tuple[str, DocumentIndex]
) -> None:
    text, index = document
    messages = _messages(text)
    messages[0] = {"role": "system", "content": "rule " * 3_000}
    result = assemble(messages, [_placed(messages, index)], [(0, 0)], counter=counter, budget=2_000)
    assert not result.fits
    assert result.messages == messages
    assert result.selected == 0


def test_assemble_with_room_for_no_chunk_sends_the_note_alone(
    counter: TiktokenCounter, document: tuple[str, DocumentIndex]
) -> None:
    text, index = document
    messages = _messages(text)
    skeleton = [dict(m) for m in messages]
    skeleton[1]["content"] = note(index.total_tokens)
    budget = counter.count_messages(skeleton) + 20
    result = assemble(messages, [_placed(messages, index)], [(0, 0), (0, 1)], counter=counter, budget=budget)
    assert result.fits and result.selected == 0
    assert result.messages[1]["content"] == note(index.total_tokens)


def test_assemble_replaces_only_the_document_part_and_keeps_the_question_tail(
    counter: TiktokenCounter, document: tuple[str, DocumentIndex]
) -> None:
    text, index = document
    image = {"type": "image_url", "image_url": {"url": "https://example.test/a.png"}}
    block_text = text + "\n\nWhat did the keeper log?"
    messages: list[dict[str, Any]] = [
        {"role": "user", "name": "ana", "content": [image, {"type": "text", "text": block_text}]}
    ]
    placed = Placed(Document(Block(0, 1, "user", block_text), len(text) + 2), index)
    result = assemble(messages, [placed], [(0, 2)], counter=counter, budget=5_000)
    content = result.messages[0]["content"]
    assert content[0] is image
    assert result.messages[0]["name"] == "ana"
    assert content[1]["type"] == "text"
    assert content[1]["text"].endswith(
        f"{marker(2, 2, index)}\n{index.chunks.text(text, 2).strip()}\n\nWhat did the keeper log?"
    )
    assert messages[0]["content"][1]["text"] is block_text


def test_assemble_in_two_parts_keeps_the_kept_chunks_and_trims_the_question_part_first(
    counter: TiktokenCounter, document: tuple[str, DocumentIndex]
) -> None:
    text, index = document
    messages = _messages(text)
    placed = [_placed(messages, index)]
    ranking = [(0, number) for number in range(len(index.chunks))]
    first = assemble(messages, placed, ranking, counter=counter, budget=6_000, stable_share=0.75)
    assert first.fits and first.kept is not None and not first.kept_reused
    kept_chunks = set(first.kept.chunks[0])
    assert {0, 1, 2} <= kept_chunks  # the best-ranked (then smaller ones that still fit)
    later = list(reversed(ranking))  # another question ranks the chunks the other way round
    honest = assemble(
        messages, placed, later, counter=counter, budget=6_000, stable_share=0.75, kept=first.kept
    )
    lying = Overcounting(counter, 1_000)
    trimmed = assemble(
        messages, placed, later, counter=lying, budget=6_000, stable_share=0.75, kept=first.kept
    )
    for result in (honest, trimmed):
        assert result.fits and result.kept_reused and result.kept == first.kept
        content = result.messages[1]["content"]
        assert content.split(FRESH_HEADER)[0] == first.messages[1]["content"].split(FRESH_HEADER)[0]
    assert trimmed.tokens == lying.count_messages(trimmed.messages) <= 6_000
    assert first.selected - len(kept_chunks) > 0 and trimmed.selected < honest.selected
    last = len(index.chunks) - 1
    assert marker(last, last, index) in honest.messages[1]["content"]  # part 2: the new question's best
