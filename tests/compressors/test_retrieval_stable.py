"""The kept part of the excerpts: later questions about one document repeat the earlier request's bytes
up to the end of the kept part (what a provider's prefix cache serves), and still get what they ask."""

from __future__ import annotations

from typing import Any

import pytest
import redis.asyncio as aioredis

from compressors.retrieval import RetrievalRequest, RetrievalSettings, RetrieveRelevantChunks
from compressors.retrieval.assembly import FRESH_HEADER, KEPT_HEADER
from compressors.retrieval.stable import Kept, decode_kept, encode_kept, expected_stable_tokens, kept_key
from tests.compressors.test_retrieval_store import RedisCache
from tests.fixtures.haystack import Needle, TiktokenCounter, build_haystack, multi_key_needles, o200k_encoding

BUDGET = 8_000


@pytest.fixture(scope="module")
def counter() -> TiktokenCounter:
    return TiktokenCounter(o200k_encoding())


@pytest.fixture(scope="module")
def needles() -> list[Needle]:
    found, _ = multi_key_needles(depths=[0.1, 0.3, 0.5, 0.7, 0.9], asked=0, seed=11)
    return found


@pytest.fixture(scope="module")
def document(counter: TiktokenCounter, needles: list[Needle]) -> str:
    return build_haystack(tokens=60_000, counter=counter, seed=12, needles=needles)


def _conversation(document: str, needles: list[Needle], asked: int) -> list[dict[str, Any]]:
    """The document with the first question, each answer quoting its fact, then question ``asked``."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "Answer from the document."},
        {"role": "user", "content": f"{document}\n\n{needles[0].question}"},
    ]
    for number in range(1, asked + 1):
        messages.append({"role": "assistant", "content": needles[number - 1].text})
        messages.append({"role": "user", "content": needles[number].question})
    return messages


def _stable_end(messages: list[dict[str, Any]]) -> str:
    """The request's text up to the end of its kept part (the document is in message 1)."""
    content = messages[1]["content"]
    return messages[0]["content"] + "\0" + content[: content.index(FRESH_HEADER)]


async def _ask(
    retriever: RetrieveRelevantChunks,
    messages: list[dict[str, Any]],
    counter: TiktokenCounter,
    budget: int = BUDGET,
) -> Any:
    result = await retriever(RetrievalRequest(messages, counter, budget_tokens=budget))
    assert result.outcome == "retrieved"
    assert result.tokens_after == counter.count_messages(result.messages) <= budget
    return result


@pytest.mark.anyio
async def test_second_question_repeats_the_first_requests_bytes_to_the_end_of_the_kept_part(
    counter: TiktokenCounter, document: str, needles: list[Needle]
) -> None:
    retriever = RetrieveRelevantChunks(RetrievalSettings(budget_tokens=BUDGET))
    first = await _ask(retriever, _conversation(document, needles, 0), counter)
    second = await _ask(retriever, _conversation(document, needles, 3), counter)
    assert not first.kept_reused and second.kept_reused
    prefix = _stable_end(first.messages)
    assert _stable_end(second.messages) == prefix
    assert prefix.count("[excerpt") >= 1 and KEPT_HEADER in prefix
    assert counter.count_text(prefix) >= 0.4 * BUDGET  # the kept part is the bulk of the excerpts
    assert counter.count_text(prefix) == pytest.approx(second.kept_tokens, rel=0.1)
    # the fact the second question asks is present; its answer and the first's question too
    assert needles[3].text in second.messages[1]["content"]
    assert second.messages[1]["content"].endswith(needles[0].question)
    assert second.messages[2:] == _conversation(document, needles, 3)[2:]


@pytest.mark.anyio
async def test_every_question_of_a_conversation_keeps_the_prefix_and_finds_its_fact(
    counter: TiktokenCounter, document: str, needles: list[Needle]
) -> None:
    retriever = RetrieveRelevantChunks(RetrievalSettings(budget_tokens=BUDGET))
    results = [await _ask(retriever, _conversation(document, needles, n), counter) for n in range(5)]
    assert len({_stable_end(result.messages) for result in results}) == 1
    for number, result in enumerate(results):
        assert needles[number].text in result.messages[1]["content"]


@pytest.mark.anyio
async def test_a_question_in_the_document_block_keeps_the_prefix_too(
    counter: TiktokenCounter, document: str, needles: list[Needle]
) -> None:
    """Each request the document alone with the latest question at its end (no history)."""
    retriever = RetrieveRelevantChunks(RetrievalSettings(budget_tokens=BUDGET))
    results = [
        await _ask(retriever, _conversation(document, [needle], 0), counter) for needle in needles[::-1]
    ]
    assert len({_stable_end(result.messages) for result in results}) == 1
    assert [result.kept_reused for result in results] == [False] + [True] * (len(results) - 1)
    for needle, result in zip(needles[::-1], results, strict=True):
        content = result.messages[1]["content"]
        assert needle.text in content and content.endswith(needle.question)


@pytest.mark.anyio
async def test_the_kept_part_is_shared_through_the_cache_with_another_instance(
    counter: TiktokenCounter,
    document: str,
    needles: list[Needle],
    redis_client: aioredis.Redis,
    tenant_name: str,
) -> None:
    cache = RedisCache(redis_client, tenant_name)
    settings = RetrievalSettings(budget_tokens=BUDGET)
    first = await _ask(
        RetrieveRelevantChunks(settings, cache=cache), _conversation(document, needles, 0), counter
    )
    other = RetrieveRelevantChunks(settings, cache=cache)  # another replica: nothing in its memory
    second = await _ask(other, _conversation(document, needles, 4), counter)
    assert second.kept_reused and _stable_end(second.messages) == _stable_end(first.messages)
    assert needles[4].text in second.messages[1]["content"]


@pytest.mark.anyio
async def test_a_kept_part_that_no_longer_fits_or_is_too_small_is_chosen_again(
    counter: TiktokenCounter, document: str, needles: list[Needle]
) -> None:
    retriever = RetrieveRelevantChunks(RetrievalSettings(budget_tokens=BUDGET))
    await _ask(retriever, _conversation(document, needles, 0), counter)
    smaller = await _ask(retriever, _conversation(document, needles, 2), counter, budget=BUDGET // 2)
    assert not smaller.kept_reused
    assert needles[2].text in smaller.messages[1]["content"]
    again = await _ask(retriever, _conversation(document, needles, 1), counter, budget=BUDGET // 2)
    assert again.kept_reused and _stable_end(again.messages) == _stable_end(smaller.messages)
    larger = await _ask(retriever, _conversation(document, needles, 3), counter, budget=BUDGET * 2)
    assert not larger.kept_reused and larger.kept_tokens > 2 * smaller.kept_tokens
    assert needles[3].text in larger.messages[1]["content"]


@pytest.mark.anyio
async def test_stable_share_zero_chooses_every_excerpt_for_the_question(
    counter: TiktokenCounter, document: str, needles: list[Needle]
) -> None:
    retriever = RetrieveRelevantChunks(RetrievalSettings(budget_tokens=BUDGET, stable_share=0.0))
    result = await _ask(retriever, _conversation(document, needles, 1), counter)
    content = result.messages[1]["content"]
    assert content.startswith("[Document of ~") and "excerpted for relevance" in content.split("\n")[0]
    assert KEPT_HEADER not in content and FRESH_HEADER not in content
    assert result.kept_tokens == 0 and not result.kept_reused


def test_kept_record_round_trips_and_checks_the_index() -> None:
    kept = Kept(((1, 5, 6), ()), (40, 12))
    assert decode_kept(encode_kept(kept)) == kept
    assert decode_kept(b"not json") is None and decode_kept(b'{"chunks": [[1]]}') is None
    assert kept.valid_for([40, 12])
    assert not kept.valid_for([40, 13]) and not kept.valid_for([6, 12]) and not kept.valid_for([40])
    assert kept_key(["a", "b"]) != kept_key(["b", "a"]) and kept_key(["a"]).startswith("retrieval:kept:")


def test_expected_stable_tokens_is_the_share_of_the_room_for_excerpts() -> None:
    assert expected_stable_tokens(budget_tokens=125_000, skeleton_tokens=5_000, stable_share=0.6) == 72_000
    assert expected_stable_tokens(budget_tokens=4_000, skeleton_tokens=5_000, stable_share=0.6) == 0
    assert expected_stable_tokens(budget_tokens=125_000, skeleton_tokens=5_000, stable_share=0.0) == 0


@pytest.mark.anyio
@pytest.mark.parametrize("budget", [1_500, 2_400, 5_000, 13_000, 34_000])
async def test_both_parts_stay_within_the_budget_in_document_order(
    counter: TiktokenCounter, document: str, needles: list[Needle], budget: int
) -> None:
    retriever = RetrieveRelevantChunks(RetrievalSettings(budget_tokens=budget))
    for asked in (0, 2):
        result = await _ask(retriever, _conversation(document, needles, asked), counter, budget)
        content = result.messages[1]["content"]
        kept, fresh = content.split(FRESH_HEADER)
        for part in (kept, fresh):
            places = [
                int(line.split()[1].split("/")[0].split("\u2013")[0])
                for line in part.split("\n")
                if line.startswith("[excerpt")
            ]
            assert places == sorted(places)
        assert budget - result.tokens_after < 800 + 60 + budget // 50  # filled: no more than a chunk left
