"""A small needle-in-a-haystack suite (the full one is tests/bench/bench_retrieval.py)."""

from __future__ import annotations

import random
from typing import Any

import pytest

from compressors.retrieval import RetrievalRequest, RetrievalSettings, RetrieveRelevantChunks
from tests.fixtures.haystack import (
    TiktokenCounter,
    build_haystack,
    cjk_paragraph,
    multi_key_needles,
    o200k_encoding,
    single_needle,
)

SETTINGS = RetrievalSettings(budget_tokens=8_000)


@pytest.fixture(scope="module")
def counter() -> TiktokenCounter:
    return TiktokenCounter(o200k_encoding())


@pytest.mark.anyio
@pytest.mark.parametrize("tokens", [50_000, 100_000])
@pytest.mark.parametrize("depth", [0.1, 0.5, 0.9])
async def test_needle_single_is_forwarded_within_budget(
    counter: TiktokenCounter, tokens: int, depth: float
) -> None:
    needle = single_needle(depth=depth)
    text = build_haystack(tokens=tokens, counter=counter, seed=tokens + int(depth * 10), needles=[needle])
    messages = [{"role": "user", "content": f"{text}\n\n{needle.question}"}]
    result = await RetrieveRelevantChunks(SETTINGS)(RetrievalRequest(messages, counter))
    assert result.outcome == "retrieved"
    assert needle.text in result.messages[0]["content"]
    assert result.messages[0]["content"].endswith(needle.question)
    assert counter.count_messages(result.messages) == result.tokens_after <= SETTINGS.budget_tokens
    assert abs(result.tokens_before - counter.count_messages(messages)) <= 5


@pytest.mark.anyio
@pytest.mark.parametrize("asked", [0, 2, 4])
async def test_needle_multi_key_finds_the_asked_key(counter: TiktokenCounter, asked: int) -> None:
    needles, target = multi_key_needles(depths=[0.1, 0.3, 0.5, 0.7, 0.9], asked=asked, seed=asked)
    text = build_haystack(tokens=80_000, counter=counter, seed=40 + asked, needles=needles)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "Answer from the document."},
        {
            "role": "user",
            "content": [{"type": "text", "text": text}, {"type": "text", "text": target.question}],
        },
    ]
    result = await RetrieveRelevantChunks(SETTINGS)(RetrievalRequest(messages, counter))
    forwarded = result.messages[1]["content"][0]["text"]
    assert target.text in forwarded
    assert result.messages[1]["content"][1]["text"] == target.question
    assert counter.count_messages(result.messages) <= SETTINGS.budget_tokens


@pytest.mark.anyio
async def test_needle_in_unspaced_chinese_text(counter: TiktokenCounter) -> None:
    rng = random.Random(5)
    paragraphs = [cjk_paragraph(rng) for _ in range(700)]
    # "The blue lighthouse's code is 4821." / "What is the blue lighthouse's code?"
    needle = "\u84dd\u8272\u706f\u5854\u7684\u5bc6\u7801\u662f4821\u3002"
    paragraphs.insert(350, paragraphs.pop(350) + needle)
    question = "\u84dd\u8272\u706f\u5854\u7684\u5bc6\u7801\u662f\u4ec0\u4e48\uff1f"
    messages = [{"role": "user", "content": "\n".join(paragraphs)}, {"role": "user", "content": question}]
    result = await RetrieveRelevantChunks(RetrievalSettings(budget_tokens=4_000))(
        RetrievalRequest(messages, counter)
    )
    assert result.outcome == "retrieved"
    assert needle in result.messages[0]["content"]
    assert counter.count_messages(result.messages) <= 4_000
