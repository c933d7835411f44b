"""``SummarizeOldTurns``: old turns become one cached summary; recent turns and system messages stay.

For a request: select the old blocks; compute the name of every prefix of them; find the longest
prefix with a cached summary. If that summary, followed by everything after its prefix, fits the
target, it is reused as it is: no cheap-model call, turn after turn, until the conversation grows
past the target again. Otherwise a summary of the whole old part is written, from the cached one plus
the newer old blocks when there is one (incremental), from scratch otherwise, once across concurrent
requests (single flight), and cached for the next turn.
"""

from __future__ import annotations

from collections.abc import Sequence

from compressors.flight import single_flight
from compressors.protocols import Cache, Completer, Message, TokenCounter
from compressors.summary.assembly import assemble
from compressors.summary.errors import CannotCompress
from compressors.summary.keys import lock_key, prefix_hashes
from compressors.summary.result import Precomputed, SummaryResult
from compressors.summary.selection import Selection, select
from compressors.summary.settings import SummarySettings
from compressors.summary.store import CachedSummary, SummaryStore
from compressors.summary.summarizer import Summarizer
from compressors.summary.transcript import render_block


class SummarizeOldTurns:
    """The summary compressor; long-lived, with the gateway's counter, cheap-model completer and cache."""

    def __init__(self, *, counter: TokenCounter, completer: Completer, cache: Cache) -> None:
        self._counter = counter
        self._completer = completer
        self._cache = cache

    async def compress(
        self, messages: Sequence[Message], settings: SummarySettings, *, tokens_before: int | None = None
    ) -> SummaryResult:
        """The request with its old turns summarised, at most ``settings.target_tokens`` tokens.

        Raises ``CannotCompress`` when what stays verbatim (or that plus the summary) is over the
        target, and ``SummaryFailed`` when no summary could be written. ``tokens_before`` saves a
        recount when the gateway has already counted the request.
        """
        before = self._counter.count_messages(messages) if tokens_before is None else tokens_before
        selection, kept_tokens = self._select(messages, settings)
        result, _ = await self._summarize(messages, selection, settings, before=before)
        if result.tokens_after > settings.target_tokens:
            raise CannotCompress(
                f"the summarised request has {result.tokens_after} tokens, over the target of "
                f"{settings.target_tokens}; the part kept verbatim alone has {kept_tokens}",
                kept_tokens=kept_tokens,
                target_tokens=settings.target_tokens,
                calls_made=result.calls_made,
            )
        return result

    async def precompute(self, messages: Sequence[Message], settings: SummarySettings) -> Precomputed:
        """Write and cache the summary ``compress`` would need for these messages, ahead of time.

        Meant to run in the background after a response, so that the request that later crosses the
        warning line finds its summary cached. Raises like ``compress``, except that a result over the
        target is not an error here.
        """
        selection, _ = self._select(messages, settings)
        result, covered = await self._summarize(messages, selection, settings, before=None)
        return Precomputed(
            summarized_blocks=covered, cache_hit=result.cache_hit, calls_made=result.calls_made
        )

    def _select(self, messages: Sequence[Message], settings: SummarySettings) -> tuple[Selection, int]:
        selection = select(messages, settings=settings, counter=self._counter)
        kept_tokens = self._counter.count_messages([messages[i] for i in selection.kept(len(messages))])
        if kept_tokens > settings.target_tokens:
            raise CannotCompress(
                f"the part kept verbatim (system messages, recent turns, last user message) has "
                f"{kept_tokens} tokens, over the target of {settings.target_tokens}",
                kept_tokens=kept_tokens,
                target_tokens=settings.target_tokens,
            )
        return selection, kept_tokens

    async def _summarize(
        self,
        messages: Sequence[Message],
        selection: Selection,
        settings: SummarySettings,
        *,
        before: int | None,
    ) -> tuple[SummaryResult, int]:
        """The result and how many blocks its summary covers."""
        if not selection.summarized():
            tokens = self._counter.count_messages(messages) if before is None else before
            unchanged = SummaryResult(
                messages=list(messages),
                tokens_before=tokens,
                tokens_after=tokens,
                summarized=None,
                summarized_count=0,
                cache_hit=False,
                calls_made=0,
            )
            return unchanged, 0
        hashes = prefix_hashes(messages, selection.blocks[: selection.split], settings=settings)
        store = SummaryStore(self._cache, ttl_seconds=settings.cache_ttl)
        cached = await store.find_longest(hashes, upto=selection.split)
        if cached is not None and selection.summarized(cached.blocks):
            reused = self._result(messages, selection, cached, before=before, cache_hit=True, calls_made=0)
            if cached.blocks == selection.split or reused.tokens_after <= settings.target_tokens:
                return reused, cached.blocks
        summary, produced, calls_made = await self._write(
            messages, selection, settings, hashes, store, cached
        )
        result = self._result(
            messages, selection, summary, before=before, cache_hit=not produced, calls_made=calls_made
        )
        return result, summary.blocks

    async def _write(
        self,
        messages: Sequence[Message],
        selection: Selection,
        settings: SummarySettings,
        hashes: Sequence[str],
        store: SummaryStore,
        base: CachedSummary | None,
    ) -> tuple[CachedSummary, bool, int]:
        """The summary of the whole old part, whether this call wrote it, and the cheap calls it made.

        Written from ``base`` (a summary of a shorter prefix) plus the blocks after it when given,
        from scratch otherwise; once across concurrent requests.
        """
        summarizer = Summarizer(completer=self._completer, counter=self._counter, settings=settings)
        prefix = hashes[selection.split]

        async def lookup() -> CachedSummary | None:
            return await store.load(prefix, blocks=selection.split)

        async def produce() -> CachedSummary:
            start = 0 if base is None else base.blocks
            pieces = [render_block(messages, block) for block in selection.blocks[start : selection.split]]
            text = await summarizer.summarize(pieces, previous=None if base is None else base.text)
            summary = CachedSummary(blocks=selection.split, text=text)
            await store.save(hashes, summary)
            return summary

        summary, produced = await single_flight(
            self._cache,
            lock=lock_key(prefix),
            lookup=lookup,
            produce=produce,
            lock_ttl=settings.lock_ttl,
            wait=settings.lock_ttl,
            poll_interval=settings.poll_interval,
        )
        return summary, produced, summarizer.calls_made

    def _result(
        self,
        messages: Sequence[Message],
        selection: Selection,
        summary: CachedSummary,
        *,
        before: int | None,
        cache_hit: bool,
        calls_made: int,
    ) -> SummaryResult:
        summarized = selection.summarized(summary.blocks)
        compressed = assemble(messages, summarized=summarized, text=summary.text)
        return SummaryResult(
            messages=compressed,
            tokens_before=self._counter.count_messages(messages) if before is None else before,
            tokens_after=self._counter.count_messages(compressed),
            summarized=range(summarized[0], summarized[-1] + 1),
            summarized_count=len(summarized),
            cache_hit=cache_hit,
            calls_made=calls_made,
        )
