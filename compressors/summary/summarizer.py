"""Cheap-model calls: one checked call with one stricter retry, and the chunked map-reduce.

When the text to summarise does not fit in one call (``SummarySettings.transcript_budget``), the
blocks are packed into chunks on block boundaries (a tool pair is never split), the chunks are
summarised concurrently under a semaphore, and their summaries are merged, in rounds when even they do
not fit in one call. The earlier summary given as context (for a part continuing it) goes with a
single call only; chunks are summarised without it. ``merge`` rolls summary parts up into one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from compressors.protocols import Completer, TokenCounter
from compressors.summary.errors import SummaryFailed
from compressors.summary.prompt import build_prompt, clean, missing_sections
from compressors.summary.settings import SummarySettings

SEPARATOR = "\n\n"


class Summarizer:
    """Writes one summary; counts the cheap-model calls it makes (``calls_made``)."""

    def __init__(self, *, completer: Completer, counter: TokenCounter, settings: SummarySettings) -> None:
        self._completer = completer
        self._counter = counter
        self._settings = settings
        self._budget = settings.transcript_budget
        self._semaphore = asyncio.Semaphore(settings.max_concurrency)
        self._failed: SummaryFailed | None = None
        self.calls_made = 0

    async def summarize(self, pieces: Sequence[str], *, context: str | None = None) -> str:
        """A summary of ``pieces`` (rendered blocks, oldest first) alone; ``context`` is the summary of
        what came before, shown to the cheap model when everything fits in one call."""
        earlier = [] if context is None else [context]
        # Counting a long transcript takes tens of milliseconds: a worker thread does it, so the event
        # loop keeps serving other requests meanwhile (the counter is thread-safe).
        sized, earlier_tokens = await asyncio.to_thread(self._size, pieces, earlier)
        total = sum(tokens for _, tokens in sized) + earlier_tokens
        if total <= self._budget:
            return await self._call(earlier, SEPARATOR.join(text for text, _ in sized))
        chunks = _pack(sized, self._budget, minimum=1)
        partials = await self._gather(lambda chunk: self._call([], SEPARATOR.join(chunk)), chunks)
        return await self.merge(partials)

    def _size(self, pieces: Sequence[str], earlier: Sequence[str]) -> tuple[list[tuple[str, int]], int]:
        return [self._fit(piece) for piece in pieces], sum(self._counter.count_text(s) for s in earlier)

    async def merge(self, summaries: list[str]) -> str:
        """One summary of consecutive summaries (oldest first), merged in rounds when they do not fit."""
        while len(summaries) > 1:
            sized = [(text, self._counter.count_text(text)) for text in summaries]
            batches = _pack(sized, self._budget, minimum=2)
            summaries = await self._gather(self._merge_batch, batches)
        return summaries[0]

    async def _merge_batch(self, batch: list[str]) -> str:
        return batch[0] if len(batch) == 1 else await self._call(batch, None)

    async def _gather(
        self, work: Callable[[list[str]], Coroutine[Any, Any, str]], items: list[list[str]]
    ) -> list[str]:
        # every call already sent is waited for, never cancelled: the provider bills it either way, and only
        # a call that returns is in the ledger; the ones not started yet are skipped once one has failed
        results = await asyncio.gather(*(work(item) for item in items), return_exceptions=True)
        for result in results:
            if isinstance(result, SummaryFailed):
                raise SummaryFailed(str(result), calls_made=self.calls_made) from result
            if isinstance(result, BaseException):
                raise result
        return [result for result in results if isinstance(result, str)]

    async def _call(self, summaries: list[str], transcript: str | None) -> str:
        """One summary through the cheap model, retried once with a stricter prompt when malformed."""
        async with self._semaphore:
            if self._failed is not None:
                raise self._failed  # another part has failed: this one is not worth a call
            try:
                return await self._attempt(summaries, transcript)
            except SummaryFailed as failed:
                self._failed = failed
                raise

    async def _attempt(self, summaries: list[str], transcript: str | None) -> str:
        for strict in (False, True):
            prompt = build_prompt(summaries=summaries, transcript=transcript, strict=strict)
            self.calls_made += 1
            try:
                answer = await self._completer.complete(prompt, max_tokens=self._settings.summary_max_tokens)
            except Exception as exc:
                raise SummaryFailed(
                    f"the cheap model {self._settings.cheap_model!r} failed: {type(exc).__name__}: {exc}",
                    calls_made=self.calls_made,
                ) from exc
            text = clean(answer)
            missing = missing_sections(text)
            if not missing:
                return text
        raise SummaryFailed(
            f"the cheap model {self._settings.cheap_model!r} answered twice without the sections "
            f"{', '.join(missing)}",
            calls_made=self.calls_made,
        )

    def _fit(self, piece: str) -> tuple[str, int]:
        """A rendered block and its tokens, its middle cut out when it alone exceeds one call."""
        tokens = self._counter.count_text(piece)
        if tokens <= self._budget:
            return piece, tokens
        ids = self._counter.encode(piece)
        marker = f"\n[... {{}} of {len(ids)} tokens left out here by the gateway ...]\n"
        room = max(self._budget - self._counter.count_text(marker.format(len(ids))) - 8, 3)
        head, tail = ids[: room * 2 // 3], ids[len(ids) - room // 3 :]
        text = (
            self._counter.decode(head)
            + marker.format(len(ids) - len(head) - len(tail))
            + self._counter.decode(tail)
        )
        return text, self._counter.count_text(text)


def _pack(sized: Sequence[tuple[str, int]], budget: int, *, minimum: int) -> list[list[str]]:
    """Consecutive items grouped so that each group fits ``budget``; a group holds at least ``minimum``
    items (when that many are left), so merging always makes progress."""
    groups: list[list[str]] = []
    current: list[str] = []
    used = 0
    for text, tokens in sized:
        if current and used + tokens > budget and len(current) >= minimum:
            groups.append(current)
            current, used = [], 0
        current.append(text)
        used += tokens
    if current:
        groups.append(current)
    return groups
