"""``SummarizeOldTurns``: old turns become cached summary parts; what the user said and the recent blocks
stay; what the latest request asks about is recalled.

For a request: select the old blocks (``selection``); name every prefix of them (``keys``); find the
longest prefix with a cached compaction (``store``). While that compaction, laid out with everything
after its prefix (``compaction.lay_out``), counts at most ``reuse_tokens``, it is sent as it is: no
cheap-model call, the same bytes up to where the request grows, turn after turn, so the provider's
prompt cache keeps serving them. Past it with nothing older to summarise (an agent's current turn
piling up tool outputs), the summary stays and the verbatim part's oldest tool outputs are cut anew by
the cap. Otherwise only past ``reuse_tokens`` is a new compaction written, once across
concurrent requests (single flight), aimed at ``target_tokens``: a part appended after the cached ones
(or the first part, or a roll-up; see ``compaction``), with the tool outputs over the cap excerpted;
when what the selection keeps verbatim is over the target even so, the split moves later
(``selection.deepen``) and the current turn's older calls are summarised too.
Either way the request then gets, right before its newest step (never last), the excerpts of the
summarised turns most relevant to its latest question (``recall``), within what the limit leaves.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import TYPE_CHECKING

import compressors.summary.compaction as compaction
from compressors.flight import single_flight
from compressors.lru import Lru
from compressors.protocols import Cache, Completer, Message, TokenCounter
from compressors.summary.compaction import View
from compressors.summary.errors import CannotCompress
from compressors.summary.keys import lock_key, prefix_hashes
from compressors.summary.result import Precomputed, SummaryResult
from compressors.summary.selection import Selection, answered, deepen, select
from compressors.summary.settings import SummarySettings
from compressors.summary.store import CachedSummary, SummaryStore
from compressors.summary.summarizer import Summarizer

if TYPE_CHECKING:
    from compressors.retrieval.index import DocumentIndex


@dataclass(frozen=True, slots=True)
class _Compacted:
    view: View
    blocks: int
    """Blocks the compaction covers."""
    reused: bool
    cache_hit: bool
    calls_made: int
    over_target: bool = False
    """Newly written, but what it keeps verbatim could not come under the target: held to the reuse limit."""


class SummarizeOldTurns:
    """The summary compressor, with the gateway's counter, cheap-model completer and cache."""

    def __init__(
        self,
        *,
        counter: TokenCounter,
        completer: Completer,
        cache: Cache,
        recall_memory: Lru[DocumentIndex] | None = None,
    ) -> None:
        """``recall_memory``: recall indexes kept in this process across requests (share one)."""
        self._counter = counter
        self._completer = completer
        self._cache = cache
        self._recall_memory = recall_memory

    async def compress(
        self, messages: Sequence[Message], settings: SummarySettings, *, tokens_before: int | None = None
    ) -> SummaryResult:
        """The request compacted: at most ``reuse_tokens`` when a cached compaction is reused as it is,
        at most ``target_tokens`` when one is written.

        Raises ``CannotCompress`` when the result is over that limit, or when what a new compaction
        keeps verbatim (after the cap's excerpts) is over the target; ``SummaryFailed`` when no summary
        could be written. ``tokens_before`` saves a recount when the gateway has already counted it.
        """
        before = self._counter.count_messages(messages) if tokens_before is None else tokens_before
        selection, compacted = await self._compact_within(messages, settings)
        if compacted is None:
            return _unchanged(messages, before)
        limit = settings.reuse_limit if compacted.reused or compacted.over_target else settings.target_tokens
        result = await self._finish(messages, selection, compacted, settings, before=before, limit=limit)
        if result.tokens_after > limit:
            kept = self._counter.count_messages(compacted.view.verbatim())
            name = "reuse limit" if compacted.reused else "target"
            raise CannotCompress(
                f"the summarised request has {result.tokens_after} tokens, over the {name} of {limit}; "
                f"the part kept verbatim alone has {kept}",
                kept_tokens=kept,
                target_tokens=limit,
                calls_made=result.calls_made,
            )
        return result

    async def precompute(self, messages: Sequence[Message], settings: SummarySettings) -> Precomputed:
        """Write and cache the compaction ``compress`` would need for these messages, ahead of time.

        Meant to run in the background after a response, so that the request that later crosses the
        warning line finds it cached. Follows the rules of ``compress`` (a cached compaction within
        ``reuse_tokens`` is left as it is) and raises like it, except that a result over the limit is
        not an error here.
        """
        _, compacted = await self._compact_within(messages, settings)
        if compacted is None:
            return Precomputed(summarized_blocks=0, cache_hit=False, calls_made=0)
        return Precomputed(
            summarized_blocks=compacted.blocks,
            cache_hit=compacted.cache_hit,
            calls_made=compacted.calls_made,
        )

    async def _compact_within(
        self, messages: Sequence[Message], settings: SummarySettings
    ) -> tuple[Selection, _Compacted | None]:
        """The selection and the request laid out with its compaction; when what the selection keeps
        verbatim is over the target, once more with the later split of ``selection.deepen`` (the
        current turn's older calls summarised too), before any cheap-model call."""
        selection = select(messages, settings=settings, counter=self._counter)
        try:
            return selection, await self._compact(messages, selection, settings)
        except CannotCompress:
            deeper = deepen(messages, selection, settings=settings, counter=self._counter)
        if deeper is not None:
            selection = deeper
            try:
                return selection, await self._compact(messages, selection, settings)
            except CannotCompress:
                pass
        # nothing more can be summarised and what stays (the outputs the model is about to answer, whole)
        # is still over the target: a compaction within the reuse limit beats cutting what it must read
        return selection, await self._compact(messages, selection, settings, ceiling=settings.reuse_limit)

    async def _compact(
        self,
        messages: Sequence[Message],
        selection: Selection,
        settings: SummarySettings,
        *,
        ceiling: int | None = None,
    ) -> _Compacted | None:
        """The request laid out with a reused or a newly written compaction; None: nothing is old.
        ``ceiling``: what a new compaction may keep verbatim (the target unless given)."""
        most = settings.target_tokens if ceiling is None else ceiling
        if not selection.summarized():
            return None
        hashes = prefix_hashes(messages, selection.blocks[: selection.split], settings=settings)
        store = SummaryStore(self._cache, ttl_seconds=settings.cache_ttl)
        cached = await store.find_longest(hashes, upto=selection.split)
        base: CachedSummary | None = None
        if cached is not None:
            view = await self._lay_out(messages, selection, cached, settings)
            if view.replaced:
                if view.tokens <= settings.reuse_limit:
                    return _Compacted(view, cached.blocks, reused=True, cache_hit=True, calls_made=0)
                if not selection.summarized(start=cached.blocks):  # nothing newer to summarise
                    return await self._recut(messages, selection, settings, hashes, store, cached, view)
                base = cached
        excerpted, kept_tokens = await asyncio.to_thread(
            partial(compaction.verbatim, settings=settings, counter=self._counter), messages, selection, base
        )
        if kept_tokens > most:
            name = "target" if most == settings.target_tokens else "reuse limit"
            raise CannotCompress(
                f"the part kept verbatim (system messages, recent turns, last user message) has "
                f"{kept_tokens} tokens, over the {name} of {most}",
                kept_tokens=kept_tokens,
                target_tokens=most,
            )
        summary, produced, calls_made = await self._write(
            messages, selection, settings, hashes, store, base, excerpted
        )
        view = await self._lay_out(messages, selection, summary, settings)
        over = kept_tokens > settings.target_tokens
        return _Compacted(
            view,
            summary.blocks,
            reused=False,
            cache_hit=not produced,
            calls_made=calls_made,
            over_target=over,
        )

    async def _recut(
        self,
        messages: Sequence[Message],
        selection: Selection,
        settings: SummarySettings,
        hashes: Sequence[str],
        store: SummaryStore,
        cached: CachedSummary,
        view: View,
    ) -> _Compacted:
        """The cached compaction over the reuse limit with nothing older left to summarise (an agent's
        current turn piling up tool outputs after it): its summary kept, the verbatim part's oldest tool
        outputs cut anew by the cap, then held to the target like a new compaction. No cheap call, and
        the conversation stays compacted rather than switching to excerpts of its documents. When the cap
        cuts nothing more, it stays the reused compaction (and the reuse limit applies)."""
        verbatim = partial(compaction.verbatim, settings=settings, counter=self._counter)
        recut, _ = await asyncio.to_thread(verbatim, messages, selection, cached)
        if recut == cached.excerpted:
            return _Compacted(view, cached.blocks, reused=True, cache_hit=True, calls_made=0)
        summary = replace(cached, excerpted=recut)
        await store.save(hashes, summary)
        view = await self._lay_out(messages, selection, summary, settings)
        return _Compacted(view, summary.blocks, reused=False, cache_hit=True, calls_made=0)

    async def _write(
        self,
        messages: Sequence[Message],
        selection: Selection,
        settings: SummarySettings,
        hashes: Sequence[str],
        store: SummaryStore,
        base: CachedSummary | None,
        excerpted: tuple[tuple[int, int], ...],
    ) -> tuple[CachedSummary, bool, int]:
        """The compaction of ``blocks[:split]``, whether this call wrote it, and the cheap calls it
        made; once across concurrent requests."""
        summarizer = Summarizer(completer=self._completer, counter=self._counter, settings=settings)
        prefix = hashes[selection.split]

        async def lookup() -> CachedSummary | None:
            return await store.load(prefix, blocks=selection.split)

        async def produce() -> CachedSummary:
            summary = await compaction.write(
                messages,
                selection,
                base=base,
                excerpted=excerpted,
                summarizer=summarizer,
                settings=settings,
                counter=self._counter,
            )
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

    async def _lay_out(
        self,
        messages: Sequence[Message],
        selection: Selection,
        summary: CachedSummary,
        settings: SummarySettings,
    ) -> View:
        # Laying out counts the whole request (tens of milliseconds when it is long): a worker thread
        # does it, so the event loop keeps serving other requests meanwhile.
        lay_out = partial(compaction.lay_out, settings=settings, counter=self._counter)
        return await asyncio.to_thread(lay_out, messages, selection, summary)

    async def _finish(
        self,
        messages: Sequence[Message],
        selection: Selection,
        compacted: _Compacted,
        settings: SummarySettings,
        *,
        before: int,
        limit: int,
    ) -> SummaryResult:
        """The result, with the recall message when there is room for one under ``limit``."""
        view = compacted.view
        # recall brings numpy and bm25s: imported when a request first recalls, not with the package
        from compressors.summary.recall import place, question, recall

        recalled = await recall(
            messages,
            view.recallable(messages),
            asked=question(messages, selection.last_user),
            budget=min(settings.recall_tokens, limit - view.tokens) if recalls(messages, settings) else 0,
            counter=self._counter,
            cache=self._cache,
            ttl_seconds=settings.cache_ttl,
            memory=self._recall_memory,
        )
        final = view.messages if recalled is None else place(view.messages, recalled)
        return SummaryResult(
            messages=final,
            tokens_before=before,
            tokens_after=view.tokens if recalled is None else self._counter.count_messages(final),
            summarized=range(view.replaced[0], view.replaced[-1] + 1),
            summarized_count=len(view.replaced),
            cache_hit=compacted.cache_hit,
            calls_made=compacted.calls_made,
            reused=compacted.reused,
            parts=len(view.sections),
            pinned=view.pinned,
            recalled_chunks=0 if recalled is None else recalled.chunks,
            excerpted=view.excerpted,
        )


def recalls(messages: Sequence[Message], settings: SummarySettings) -> bool:
    """Whether this request gets a recall: for a user's turn, and while the model reads tool outputs only
    when the settings say so (``recall_on_tool_steps``)."""
    return settings.recall_on_tool_steps or not answered(messages)


def _unchanged(messages: Sequence[Message], tokens: int) -> SummaryResult:
    return SummaryResult(
        messages=list(messages),
        tokens_before=tokens,
        tokens_after=tokens,
        summarized=None,
        summarized_count=0,
        cache_hit=False,
        calls_made=0,
    )
