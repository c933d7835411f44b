"""RetrieveRelevantChunks: the retrieval strategy, from a request's messages to its excerpted messages.

Top to bottom: find the blocks that may be documents; get each one's index (chunks + BM25) from this
process's memory, the shared cache or by building it off the event loop; decide the documents and
the question (``documents``); rank every chunk of every document against the question (BM25, fused
with embeddings when hybrid); assemble the best chunks within the budget (``assembly``), the part kept
from an earlier question about the same documents first (``stable``), remembered for the next one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial

import numpy as np

from compressors.lru import Lru
from compressors.messages import latest_user
from compressors.protocols import Cache, Embedder, Message, TokenCounter
from compressors.retrieval.assembly import Placed, assemble
from compressors.retrieval.codec import decode_index, encode_index
from compressors.retrieval.documents import (
    Block,
    Layout,
    document_end,
    layout,
    may_be_document,
    replace_block,
    text_blocks,
)
from compressors.retrieval.embedding import Vectors, decode_vectors, embed_all, encode_vectors, vectors_key
from compressors.retrieval.index import DocumentIndex, build_index, index_key
from compressors.retrieval.ranking import (
    Order,
    Scores,
    complete,
    cosine_scores,
    fuse,
    order_by_score,
    phrase_scores,
)
from compressors.retrieval.result import EmbeddingCall, Outcome, RetrievalRequest, RetrievalResult
from compressors.retrieval.settings import RetrievalSettings
from compressors.retrieval.stable import KeptStore, kept_key
from compressors.retrieval.store import Source, Store

_ESTIMATE_SLACK = 64
"""Tokens by which the estimated request size may be off (piece counts at joins, message overhead)."""


@dataclass(frozen=True, slots=True)
class _Indexed:
    key: str
    index: DocumentIndex
    source: Source
    data: bytes
    """The document's UTF-8."""


class RetrieveRelevantChunks:
    """Excerpts the documents of a request to the chunks most relevant to its question.

    Holds the in-process memory of recent indexes, so keep one instance per settings (it is safe to
    share between concurrent requests).
    """

    def __init__(
        self, settings: RetrievalSettings, *, cache: Cache | None = None, embedder: Embedder | None = None
    ) -> None:
        self.settings = settings
        self._embedder = embedder
        self._indexes: Store[DocumentIndex] = Store(
            cache=cache,
            memory_entries=settings.memory_entries,
            ttl_seconds=settings.cache_ttl,
            lock_wait_seconds=settings.lock_wait_seconds,
            encode=encode_index,
            decode=decode_index,
        )
        self._folded: Lru[bytes] = Lru(settings.memory_entries)
        self._kept = KeptStore(
            cache=cache, memory_entries=settings.memory_entries, ttl_seconds=settings.cache_ttl
        )
        self._vectors: Store[Vectors] = Store(
            cache=cache,
            memory_entries=settings.memory_entries,
            ttl_seconds=settings.cache_ttl,
            lock_wait_seconds=settings.lock_wait_seconds,
            encode=encode_vectors,
            decode=decode_vectors,
        )

    async def __call__(self, request: RetrievalRequest) -> RetrievalResult:
        settings, counter, messages = self.settings, request.counter, request.messages
        budget = request.budget_tokens if request.budget_tokens is not None else settings.budget_tokens
        located = await self._locate(messages, counter)
        if located is None:
            return _unchanged(request, "no_document")
        plan, found_all = located
        placed = [Placed(item, found.index) for item, found in zip(plan.documents, found_all, strict=True)]
        cache_hit = all(found.source != "built" for found in found_all)
        chunks_total = sum(len(item.index.chunks) for item in placed)
        before = request.prompt_tokens or _estimate(messages, placed, counter)
        if not request.prompt_tokens and abs(before - budget) <= _ESTIMATE_SLACK:
            before = counter.count_messages(messages)  # too close to call on an estimate
        if before <= budget:
            return _unchanged(request, "under_budget", before, chunks_total, len(placed), cache_hit)
        calls: list[EmbeddingCall] = []
        embedder = request.embedder or self._embedder
        order, hybrid_error = await self._rank(plan, placed, found_all, counter, embedder, calls)
        ranking = _per_document(order, placed)
        staged = settings.stable_share > 0
        key = kept_key([found.key for found in found_all])
        kept = await self._kept.get(key) if staged else None
        assembly = await asyncio.to_thread(
            partial(
                assemble,
                messages,
                placed,
                ranking,
                counter=counter,
                budget=budget,
                stable_share=settings.stable_share,
                kept=kept,
            )
        )
        if assembly.fits and assembly.kept is not None:  # also renews its TTL while questions come
            await self._kept.put(key, assembly.kept)
        return RetrievalResult(
            messages=assembly.messages if assembly.fits else list(messages),
            outcome="retrieved" if assembly.fits else "no_room",
            tokens_before=before,
            tokens_after=assembly.tokens if assembly.fits else before,
            chunks_total=chunks_total,
            chunks_selected=assembly.selected,
            documents=len(placed),
            cache_hit=cache_hit,
            embedding_calls=tuple(calls),
            hybrid_error=hybrid_error,
            kept_tokens=assembly.kept_tokens if assembly.fits else 0,
            kept_reused=assembly.fits and assembly.kept_reused,
        )

    async def _locate(
        self, messages: Sequence[Message], counter: TokenCounter
    ) -> tuple[Layout, list[_Indexed]] | None:
        """The documents (with their indexes) and the question; None when there is no document."""
        settings = self.settings
        blocks = text_blocks(messages)
        possible = [block for block in blocks if may_be_document(block, settings.document_min_tokens)]
        if not possible:
            return None
        indexed: dict[tuple[int, int], _Indexed] = {}
        sizes: dict[int, int] = {}
        for block in possible:
            end = document_end(block, settings.question_max_chars)
            found = await self._index(block, end, counter, indexed)
            tail = counter.count_text(block.text[end:]) if end < len(block.text) else 0
            sizes[id(block)] = found.index.total_tokens + tail
        plan = layout(
            blocks,
            latest_user(messages),
            lambda block: sizes.get(id(block), 0) > settings.document_min_tokens,
            settings.question_max_chars,
        )
        if not plan.documents:
            return None
        return plan, [await self._index(item.block, item.end, counter, indexed) for item in plan.documents]

    async def _index(
        self, block: Block, end: int, counter: TokenCounter, indexed: dict[tuple[int, int], _Indexed]
    ) -> _Indexed:
        found = indexed.get((id(block), end))
        if found is None:
            text = block.text[:end] if end < len(block.text) else block.text
            data = text.encode("utf-8", "surrogatepass")
            key = index_key(data, counter, self.settings)
            index, source = await self._indexes.get(
                key, lambda: asyncio.to_thread(build_index, text, counter, self.settings)
            )
            found = indexed[(id(block), end)] = _Indexed(key, index, source, data)
        return found

    async def _rank(
        self,
        plan: Layout,
        placed: Sequence[Placed],
        found_all: Sequence[_Indexed],
        counter: TokenCounter,
        embedder: Embedder | None,
        calls: list[EmbeddingCall],
    ) -> tuple[Order, str | None]:
        """All chunks of all documents, best first (global numbering in document order)."""
        size = sum(len(item.index.chunks) for item in placed)
        lexical = order_by_score(
            np.concatenate(
                [
                    self._lexical_scores(item, found, plan.question)
                    for item, found in zip(placed, found_all, strict=True)
                ]
            )
        )
        if not (self.settings.hybrid and embedder is not None and plan.question):
            return complete(lexical, size), None
        try:
            keys = [found.key for found in found_all]
            dense = await self._dense_scores(embedder, plan.question, placed, keys, counter, calls)
        except Exception as exc:  # an optional ranking: fall back to BM25 alone and say why
            failure = exc.exceptions[0] if isinstance(exc, ExceptionGroup) else exc
            return complete(lexical, size), type(failure).__name__
        dense_order = np.argsort(-dense, kind="stable").astype(np.int64)
        return complete(fuse([lexical, dense_order], size=size, k=self.settings.rrf_k), size), None

    def _lexical_scores(self, item: Placed, found: _Indexed, question: str) -> Scores:
        """BM25 with the phrase bonus; the folded bytes are remembered with the index."""
        folded = self._folded.get(found.key)
        if folded is None:
            folded = found.data.lower()
            self._folded.put(found.key, folded)
        chunks, lexical = item.index.chunks, item.index.lexical
        return phrase_scores(
            lexical.scores(question),
            question,
            lexical,
            folded=folded,
            starts=chunks.byte_starts,
            ends=chunks.byte_ends,
        )

    async def _dense_scores(
        self,
        embedder: Embedder,
        question: str,
        placed: Sequence[Placed],
        keys: Sequence[str],
        counter: TokenCounter,
        calls: list[EmbeddingCall],
    ) -> Vectors:
        settings = self.settings
        asked = await embed_all(
            embedder, [question], [counter.count_text(question)], batch=1, concurrency=1, calls=calls
        )
        scores = []
        for item, key in zip(placed, keys, strict=True):
            chunks, text = item.index.chunks, item.document.text
            build = partial(
                embed_all,
                embedder,
                chunks.texts(text),
                (chunks.token_ends - chunks.token_starts).tolist(),
                batch=settings.embedding_batch,
                concurrency=settings.embedding_concurrency,
                calls=calls,
            )
            vectors, _ = await self._vectors.get(vectors_key(key, settings.embedding_model), build)
            scores.append(cosine_scores(vectors, asked[0].tolist()))
        return np.concatenate(scores).astype(np.float32)


def _per_document(order: Order, placed: Sequence[Placed]) -> list[tuple[int, int]]:
    """Global chunk numbers as (document number, chunk number)."""
    bounds = np.cumsum([0] + [len(item.index.chunks) for item in placed])
    numbers = np.searchsorted(bounds, order, side="right") - 1
    return list(zip(numbers.tolist(), (order - bounds[numbers]).tolist(), strict=True))


def _estimate(messages: Sequence[Message], placed: Sequence[Placed], counter: TokenCounter) -> int:
    """The request's tokens: the messages without their documents, counted, plus the documents' sizes."""
    without = list(messages)
    for item in placed:
        replace_block(without, item.document.block, item.document.tail)
    return counter.count_messages(without) + sum(item.index.total_tokens for item in placed)


def _unchanged(
    request: RetrievalRequest,
    outcome: Outcome,
    tokens: int | None = None,
    chunks_total: int = 0,
    documents: int = 0,
    cache_hit: bool = False,
) -> RetrievalResult:
    if tokens is None:
        tokens = request.prompt_tokens or request.counter.count_messages(request.messages)
    return RetrievalResult(
        messages=list(request.messages),
        outcome=outcome,
        tokens_before=tokens,
        tokens_after=tokens,
        chunks_total=chunks_total,
        chunks_selected=0,
        documents=documents,
        cache_hit=cache_hit,
    )
