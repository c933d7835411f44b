"""The compressors' seams, supplied by the gateway: a Redis cache per tenant, the cheap model and the
embeddings model called through the upstream pool (each call priced as its own cost event)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import redis.asyncio as aioredis

from compressors.lru import Lru
from compressors.protocols import Completer, Message
from compressors.summary import CannotCompress, SummarizeOldTurns, SummaryFailed, SummarySettings
from gateway.base.record import RequestRecord
from gateway.config.runtime import Runtime
from gateway.core.cache import RedisCache
from gateway.core.front import TransformFailed
from gateway.money.usage import usage_from_openai
from gateway.tokens.adapter import ModelTokens
from gateway.upstream.clients import UpstreamPool
from gateway.upstream.side_calls import side_call
from gateway.upstream.summary_completer import MessagesCompleter, messages_only
from policies import Action, Decision, Facts

if TYPE_CHECKING:  # retrieval brings numpy and bm25s: imported on first use, not by every worker at start
    from compressors.retrieval import RetrievalSettings, RetrieveRelevantChunks
    from compressors.retrieval.index import DocumentIndex

MAX_RETRIEVERS = 64


class UpstreamCompleter:
    """The cheap model, called like any other chat model; each call lands in the record as a side call."""

    def __init__(
        self,
        pool: UpstreamPool,
        runtime: Runtime,
        model: str,
        record: RequestRecord,
        *,
        kind: str = "summary",
    ) -> None:
        self._pool, self._runtime, self._model, self._record = pool, runtime, model, record
        self._kind = kind
        """The side call's kind in the ledger (``summary``; an experiment's ``judge``)."""

    async def complete(self, messages: Sequence[Message], *, max_tokens: int) -> str:
        body = {"messages": list(messages), "max_completion_tokens": max_tokens, "stream": False}
        data = await _call(
            self._pool, self._runtime, self._model, "/chat/completions", body, self._record, self._kind
        )
        try:
            content = data["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError) as exc:
            raise RuntimeError("the cheap model's answer has no message content") from exc
        if not isinstance(content, str):
            raise RuntimeError("the cheap model's answer has no text")
        return content


def cheap_completer(
    pool: UpstreamPool, runtime: Runtime, model: str, record: RequestRecord, *, kind: str = "summary"
) -> Completer:
    """The completer for ``model``: on Messages for a model of a ``kind: anthropic`` provider
    (``gateway.upstream.summary_completer``), else on chat completions."""
    if messages_only(runtime, model):
        return MessagesCompleter(pool, runtime, model, record, kind=kind)
    return UpstreamCompleter(pool, runtime, model, record, kind=kind)


class UpstreamEmbedder:
    def __init__(self, pool: UpstreamPool, runtime: Runtime, model: str, record: RequestRecord) -> None:
        self._pool, self._runtime, self._model, self._record = pool, runtime, model, record

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        data = await _call(
            self._pool,
            self._runtime,
            self._model,
            "/embeddings",
            {"input": list(texts)},
            self._record,
            "embeddings",
        )
        items = sorted(data["data"], key=lambda item: item["index"])
        return [list(item["embedding"]) for item in items]


async def _call(
    pool: UpstreamPool,
    runtime: Runtime,
    model: str,
    path: str,
    body: dict[str, Any],
    record: RequestRecord,
    kind: str,
) -> Any:
    """A chat-completions or embeddings side call to ``model`` and its fallbacks."""
    routes = runtime.candidates(model)
    return await side_call(
        pool, routes, path=path, body=body, record=record, kind=kind, model=model, usage_of=usage_from_openai
    )


class CompressorTransforms:
    """Runs the policy's transforms for one request (``planning.Transforms``)."""

    def __init__(
        self,
        *,
        runtime: Runtime,
        pool: UpstreamPool,
        redis: aioredis.Redis,
        record: RequestRecord,
        retrievers: dict[tuple[str, RetrievalSettings], RetrieveRelevantChunks],
        recall_memory: Lru[DocumentIndex] | None = None,
    ) -> None:
        self._runtime, self._pool, self._redis, self._record = runtime, pool, redis, record
        self._retrievers = retrievers
        self._recall_memory = recall_memory

    async def run(self, step: Action, messages: list[Any], decision: Decision, facts: Facts) -> list[Any]:
        counter = ModelTokens(self._runtime.counter, decision.model)
        if step is Action.COMPRESS:
            return await self._compress(messages, decision, facts, counter)
        if step is Action.RETRIEVE:
            return await self._retrieve(messages, decision, facts, counter)
        raise TransformFailed(f"unknown transform {step}")

    async def precompute(self, messages: list[Any], decision: Decision, tenant: str) -> None:
        """Build and cache the summary a later turn will need (run after the response)."""
        counter = ModelTokens(self._runtime.counter, decision.model)
        settings = self.summary_settings(decision)
        await self.summarizer(settings, tenant, counter).precompute(messages, settings)

    def summary_settings(self, decision: Decision) -> SummarySettings:
        """The policy's compress settings for ``decision.model``; raises TransformFailed when unusable."""
        settings = decision.compress
        cheap = settings.cheap_model or decision.model
        cheap_bands = self._runtime.engine.bands.get(cheap)
        options: dict[str, Any] = {}
        if settings.chunk_tokens is not None:
            options["chunk_tokens"] = settings.chunk_tokens
        if cheap_bands is not None:  # else the compressor's default window
            options["cheap_context_tokens"] = cheap_bands.window
        try:
            return SummarySettings(
                cheap_model=cheap,
                target_tokens=settings.target_tokens,
                keep_recent_turns=settings.keep_recent_turns,
                keep_recent_tokens=settings.keep_recent_tokens,
                keep_recent_max_tokens=settings.keep_recent_max_tokens,
                reuse_tokens=settings.reuse_tokens or max(settings.accept_tokens, settings.target_tokens),
                pinned_tokens=settings.pinned_tokens,
                pin_max_tokens=settings.pin_max_tokens,
                recall_tokens=settings.recall_tokens,
                recall_on_tool_steps=settings.recall_on_tool_steps,
                **options,
            )
        except ValueError as exc:  # e.g. a cheap model whose window is too small to summarise in
            raise TransformFailed(f"the summary settings do not work: {exc}", lasting=True) from exc

    def summarizer(self, settings: SummarySettings, tenant: str, counter: ModelTokens) -> SummarizeOldTurns:
        return SummarizeOldTurns(
            counter=counter,
            completer=cheap_completer(self._pool, self._runtime, settings.cheap_model, self._record),
            cache=RedisCache(self._redis, tenant, "summary"),
            recall_memory=self._recall_memory,
        )

    async def _compress(
        self, messages: list[Any], decision: Decision, facts: Facts, counter: ModelTokens
    ) -> list[Any]:
        settings = self.summary_settings(decision)
        try:
            result = await self.summarizer(settings, facts.tenant, counter).compress(
                messages, settings, tokens_before=decision.tokens
            )
        except SummaryFailed as exc:  # the cheap model failed: that may pass
            raise TransformFailed(str(exc)) from exc
        except CannotCompress as exc:  # what must stay verbatim is over the target: it will be next time too
            raise TransformFailed(str(exc), lasting=True) from exc
        return list(result.messages)

    async def _retrieve(
        self, messages: list[Any], decision: Decision, facts: Facts, counter: ModelTokens
    ) -> list[Any]:
        from compressors.retrieval import RetrievalRequest, RetrievalSettings

        rs = decision.retrieve
        hybrid = rs.hybrid and rs.embedding_model is not None
        try:  # the budget differs per model: it goes with the request, so one retriever serves them all
            settings = RetrievalSettings(
                document_min_tokens=rs.document_min_tokens,
                chunk_min=rs.chunk_tokens_min,
                chunk_max=rs.chunk_tokens_max,
                overlap=rs.overlap_tokens,
                hybrid=hybrid,
                embedding_model=rs.embedding_model or "",
            )
        except ValueError as exc:
            raise TransformFailed(f"the retrieval settings do not work: {exc}", lasting=True) from exc
        retriever = self._retrievers.get((facts.tenant, settings)) or self._keep(facts.tenant, settings)
        # the embedder bills its calls to this request; the retriever (and its indexes in memory) lives on
        embedder = (
            UpstreamEmbedder(self._pool, self._runtime, rs.embedding_model, self._record)
            if hybrid and rs.embedding_model
            else None
        )
        request = RetrievalRequest(
            messages=messages,
            counter=counter,
            prompt_tokens=decision.tokens,
            embedder=embedder,
            budget_tokens=rs.budget_tokens,
        )
        result = await retriever(request)
        if result.outcome == "under_budget":
            return messages  # it already fits the retrieval budget: nothing to cut
        if result.outcome != "retrieved":
            raise TransformFailed(
                f"retrieval could not cut the request ({result.outcome.replace('_', ' ')})", lasting=True
            )
        return list(result.messages)

    def _keep(self, tenant: str, settings: RetrievalSettings) -> RetrieveRelevantChunks:
        """A long-lived retriever per tenant and settings (it keeps recent indexes in memory), bounded."""
        from compressors.retrieval import RetrieveRelevantChunks

        while len(self._retrievers) >= MAX_RETRIEVERS:
            self._retrievers.pop(next(iter(self._retrievers)))
        retriever = RetrieveRelevantChunks(settings, cache=RedisCache(self._redis, tenant, "retrieval"))
        self._retrievers[(tenant, settings)] = retriever
        return retriever
