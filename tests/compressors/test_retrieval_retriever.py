from __future__ import annotations

import ast
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis

from compressors.retrieval import (
    EmbeddingCall,
    RetrievalRequest,
    RetrievalSettings,
    RetrieveRelevantChunks,
)
from compressors.retrieval.tokenize import words
from tests.compressors.test_retrieval_store import RedisCache
from tests.compressors.test_summary_layering import SHARED
from tests.fixtures.haystack import (
    TiktokenCounter,
    build_haystack,
    multi_key_needles,
    o200k_encoding,
    single_needle,
)

PACKAGE = Path(__file__).resolve().parents[2] / "compressors" / "retrieval"


@pytest.fixture(scope="module")
def counter() -> TiktokenCounter:
    return TiktokenCounter(o200k_encoding())


@pytest.fixture(scope="module")
def haystack(counter: TiktokenCounter) -> str:
    needles, _ = multi_key_needles(depths=[0.2, 0.4, 0.6, 0.8], asked=0, seed=9)
    return build_haystack(
        tokens=60_000, counter=counter, seed=8, needles=[*needles, single_needle(depth=0.5)]
    )


@pytest.fixture
def cache(redis_client: aioredis.Redis, tenant_name: str) -> RedisCache:
    return RedisCache(redis_client, tenant_name)


@dataclass
class HashingEmbedder:
    """A deterministic bag-of-words embedder standing in for an embeddings model."""

    dimensions: int = 256
    calls: list[int] = field(default_factory=list)

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls.append(len(texts))
        vectors = []
        for text in texts:
            vector = [0.0] * self.dimensions
            for word in words(text):
                vector[zlib.crc32(word) % self.dimensions] += 1.0
            vectors.append(vector)
        return vectors


@dataclass
class ConceptEmbedder:
    """Knows that the lighthouse code is what "the treasure" means, which no word of it says."""

    calls: list[int] = field(default_factory=list)

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls.append(len(texts))
        return [
            [1.0 if ("4821-ALPHA" in text or "treasure" in text) else 0.0, 0.0 if "treasure" in text else 1.0]
            for text in texts
        ]


class BrokenEmbedder:
    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        raise ConnectionError("embeddings model unavailable")


def _ask(document: str, question: str) -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": "Answer from the document."},
        {"role": "user", "content": f"{document}\n\n{question}"},
    ]


def _request(messages: list[dict[str, Any]], counter: TiktokenCounter, **options: Any) -> RetrievalRequest:
    return RetrievalRequest(messages, counter, **options)


@pytest.mark.anyio
async def test_retriever_leaves_requests_without_documents_unchanged(counter: TiktokenCounter) -> None:
    messages = [{"role": "user", "content": "Hello " * 100}, {"role": "assistant", "content": "Hi."}]
    result = await RetrieveRelevantChunks(RetrievalSettings())(_request(messages, counter))
    assert result.outcome == "no_document"
    assert result.messages == messages
    assert result.tokens_before == result.tokens_after == counter.count_messages(messages)
    assert (result.documents, result.chunks_total, result.chunks_selected) == (0, 0, 0)


@pytest.mark.anyio
async def test_retriever_block_just_over_the_byte_bound_is_counted_not_excerpted(
    counter: TiktokenCounter,
) -> None:
    messages = [{"role": "user", "content": "lorem ipsum " * 1_000}]  # 12,000 bytes, about 2,000 tokens
    result = await RetrieveRelevantChunks(RetrievalSettings())(
        _request(messages, counter, prompt_tokens=2_004)
    )
    assert result.outcome == "no_document"
    assert result.tokens_before == 2_004


@pytest.mark.anyio
async def test_retriever_leaves_requests_under_the_budget_unchanged(
    counter: TiktokenCounter, haystack: str
) -> None:
    messages = _ask(haystack, "What is the secret code for the blue lighthouse?")
    result = await RetrieveRelevantChunks(RetrievalSettings(budget_tokens=100_000))(
        _request(messages, counter)
    )
    assert result.outcome == "under_budget"
    assert result.messages == messages
    assert result.documents == 1 and result.chunks_total > 50


@pytest.mark.anyio
async def test_retriever_decides_on_the_exact_count_near_the_budget(
    counter: TiktokenCounter, haystack: str
) -> None:
    # a run of one letter is cut where the encoder would not cut it, so the estimate is a little off
    messages = _ask(f"{haystack}\n\n{'x' * 20_000}", "What is the secret code for the blue lighthouse?")
    exact = counter.count_messages(messages)
    retriever = RetrieveRelevantChunks(RetrievalSettings())
    assert (await retriever(_request(messages, counter, budget_tokens=exact))).outcome == "under_budget"
    result = await retriever(_request(messages, counter, budget_tokens=exact - 1))
    assert result.outcome == "retrieved"
    assert result.tokens_before == exact
    assert counter.count_messages(result.messages) == result.tokens_after <= exact - 1


@pytest.mark.anyio
async def test_retriever_reports_no_room_when_kept_messages_exceed_the_budget(
    counter: TiktokenCounter, haystack: str
) -> None:
    messages = _ask(haystack, "What is the secret code for the blue lighthouse?")
    messages.insert(1, {"role": "assistant", "content": "earlier answer " * 2_000})
    result = await RetrieveRelevantChunks(RetrievalSettings(budget_tokens=3_000))(_request(messages, counter))
    assert result.outcome == "no_room"
    assert result.messages == messages
    assert result.tokens_after == result.tokens_before


@pytest.mark.anyio
async def test_retriever_keeps_system_prompt_turns_and_question_verbatim(
    counter: TiktokenCounter, haystack: str
) -> None:
    messages = [
        {"role": "system", "content": "Answer from the document."},
        {"role": "user", "content": haystack},
        {"role": "assistant", "content": "I have read it."},
        {"role": "user", "content": "What is the secret code for the blue lighthouse?"},
    ]
    result = await RetrieveRelevantChunks(RetrievalSettings(budget_tokens=6_000))(_request(messages, counter))
    assert result.outcome == "retrieved"
    assert [result.messages[i] for i in (0, 2, 3)] == [messages[i] for i in (0, 2, 3)]
    forwarded = result.messages[1]["content"]
    assert "The secret code for the blue lighthouse is 4821-ALPHA." in forwarded
    assert forwarded.startswith("[Document of ~")
    assert result.tokens_after == counter.count_messages(result.messages) <= 6_000
    assert 0 < result.chunks_selected < result.chunks_total
    assert result.embedding_calls == () and result.hybrid_error is None


@pytest.mark.anyio
async def test_retriever_budget_of_the_request_overrides_the_settings(
    counter: TiktokenCounter, haystack: str
) -> None:
    messages = _ask(haystack, "What is the secret code for the blue lighthouse?")
    retriever = RetrieveRelevantChunks(RetrievalSettings(budget_tokens=30_000))
    result = await retriever(_request(messages, counter, budget_tokens=2_500))
    assert result.tokens_after <= 2_500
    assert "4821-ALPHA" in result.messages[1]["content"]


@pytest.mark.anyio
async def test_retriever_ranks_chunks_of_several_documents_together(counter: TiktokenCounter) -> None:
    needles, target = multi_key_needles(depths=[0.5], asked=0, seed=3)
    first = build_haystack(tokens=20_000, counter=counter, seed=31)
    second = build_haystack(tokens=20_000, counter=counter, seed=32, needles=needles)
    messages = [
        {"role": "tool", "tool_call_id": "a", "content": first},
        {"role": "tool", "tool_call_id": "b", "content": second},
        {"role": "user", "content": target.question},
    ]
    result = await RetrieveRelevantChunks(RetrievalSettings(budget_tokens=4_000))(_request(messages, counter))
    assert result.documents == 2
    assert target.text in result.messages[1]["content"]
    assert result.messages[0]["content"].startswith("[Document of ~")
    assert result.messages[0]["tool_call_id"] == "a"
    assert counter.count_messages(result.messages) <= 4_000


@pytest.mark.anyio
async def test_retriever_follow_up_questions_reuse_the_index(
    counter: TiktokenCounter, haystack: str, cache: RedisCache
) -> None:
    settings = RetrievalSettings(budget_tokens=5_000)
    first_turn = _ask(haystack, "What is the secret code for the blue lighthouse?")
    retriever = RetrieveRelevantChunks(settings, cache=cache)
    first = await retriever(_request(first_turn, counter))
    assert not first.cache_hit

    _, target = multi_key_needles(depths=[0.2, 0.4, 0.6, 0.8], asked=2, seed=9)
    follow_up = [
        *first_turn,
        {"role": "assistant", "content": "4821-ALPHA."},
        {"role": "user", "content": target.question},
    ]
    second = await retriever(_request(follow_up, counter))
    assert second.cache_hit
    assert target.text in second.messages[1]["content"]
    assert second.messages[1]["content"].endswith("What is the secret code for the blue lighthouse?")

    replica = RetrieveRelevantChunks(settings, cache=cache)
    third = await replica(_request(follow_up, counter))
    assert third.cache_hit
    assert third.messages == second.messages


@pytest.mark.anyio
async def test_retriever_hybrid_records_embedding_calls_and_caches_vectors(
    counter: TiktokenCounter, haystack: str, cache: RedisCache
) -> None:
    settings = RetrievalSettings(
        budget_tokens=5_000, hybrid=True, embedding_batch=16, embedding_model="hash-256"
    )
    embedder = HashingEmbedder()
    question = "What is the secret code for the blue lighthouse?"
    result = await RetrieveRelevantChunks(settings, cache=cache, embedder=embedder)(
        _request(_ask(haystack, question), counter)
    )
    chunks = result.chunks_total
    assert result.outcome == "retrieved" and result.hybrid_error is None
    assert sorted(call.texts for call in result.embedding_calls) == sorted(embedder.calls)
    assert result.embedded_texts == chunks + 1
    assert len(result.embedding_calls) == -(-chunks // 16) + 1
    assert max(call.texts for call in result.embedding_calls) == 16
    assert result.embedded_tokens > 55_000

    again = RetrieveRelevantChunks(settings, cache=cache, embedder=embedder)
    second = await again(_request(_ask(haystack, "Who kept the notes?"), counter))
    assert second.embedding_calls == (
        EmbeddingCall(texts=1, tokens=counter.count_text("Who kept the notes?")),
    )


@pytest.mark.anyio
@pytest.mark.parametrize("hybrid", [True, False])
async def test_retriever_hybrid_finds_chunks_that_share_no_word_with_the_question(
    counter: TiktokenCounter, haystack: str, hybrid: bool
) -> None:
    settings = RetrievalSettings(budget_tokens=3_000, hybrid=hybrid)
    messages = _ask(haystack, "Where is the treasure?")
    result = await RetrieveRelevantChunks(settings, embedder=ConceptEmbedder())(_request(messages, counter))
    assert ("4821-ALPHA" in result.messages[1]["content"]) is hybrid
    assert result.tokens_after <= 3_000


@pytest.mark.anyio
async def test_retriever_hybrid_takes_the_embedder_of_the_request(
    counter: TiktokenCounter, haystack: str
) -> None:
    settings = RetrievalSettings(budget_tokens=3_000, hybrid=True, embedding_batch=64)
    retriever = RetrieveRelevantChunks(settings, embedder=BrokenEmbedder())
    first_embedder, second_embedder = ConceptEmbedder(), ConceptEmbedder()
    messages = _ask(haystack, "Where is the treasure?")
    result = await retriever(_request(messages, counter, embedder=first_embedder))
    assert "4821-ALPHA" in result.messages[1]["content"]
    assert result.hybrid_error is None
    assert sum(first_embedder.calls) == result.chunks_total + 1
    second = await retriever(_request(messages, counter, embedder=second_embedder))
    assert second_embedder.calls == [1]  # the chunk vectors are remembered from the first request
    assert second.hybrid_error is None
    assert "4821-ALPHA" in second.messages[1]["content"]


@pytest.mark.anyio
async def test_retriever_hybrid_falls_back_to_bm25_when_embeddings_fail(
    counter: TiktokenCounter, haystack: str
) -> None:
    settings = RetrievalSettings(budget_tokens=5_000, hybrid=True)
    question = "What is the secret code for the blue lighthouse?"
    result = await RetrieveRelevantChunks(settings, embedder=BrokenEmbedder())(
        _request(_ask(haystack, question), counter)
    )
    assert result.outcome == "retrieved"
    assert result.hybrid_error == "ConnectionError"
    assert "4821-ALPHA" in result.messages[1]["content"]
    assert result.embedding_calls == ()


@pytest.mark.anyio
async def test_retriever_without_a_question_takes_chunks_in_document_order(
    counter: TiktokenCounter, haystack: str
) -> None:
    messages = [{"role": "tool", "tool_call_id": "t", "content": haystack}]
    result = await RetrieveRelevantChunks(RetrievalSettings(budget_tokens=3_000))(_request(messages, counter))
    content = result.messages[0]["content"]
    assert "[excerpts 1\u2013" in content
    assert result.tokens_after <= 3_000


@pytest.mark.parametrize(
    "options",
    [
        {"chunk_min": 0},
        {"chunk_min": 900, "chunk_max": 800},
        {"overlap": 500},
        {"overlap": -1},
        {"document_min_tokens": 100},
        {"budget_tokens": 0},
        {"rrf_k": 0},
        {"cache_ttl": 0},
        {"embedding_batch": 0},
        {"memory_entries": -1},
        {"lock_wait_seconds": -1.0},
    ],
)
def test_retrieval_settings_reject_inconsistent_values(options: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        RetrievalSettings(**options)


def test_retrieval_package_imports_no_service_code() -> None:
    forbidden = {"gateway", "policies", "redis", "httpx", "fastapi", "starlette"}
    for path in PACKAGE.glob("*.py"):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            for name in names:
                assert name.split(".")[0] not in forbidden, f"{path.name} imports {name}"
                if name.startswith("compressors."):
                    assert name.startswith("compressors.retrieval") or name in SHARED, name
