"""The traffic counters of experiments (matching requests and their cost per bucket, shadowed, shed, …)
and their pairs, kept in the process and written to Redis every few seconds, never per request."""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import structlog

from gateway.experiments.trouble import RedisTrouble
from gateway.ledger.period import day_of

log = structlog.get_logger("gateway.experiments")

FLUSH_SECONDS = 2.0
MAX_PENDING_PAIRS = 10_000
"""Pairs waiting for Redis at most; beyond that (Redis away for long) new ones are dropped and counted."""

Write = Callable[[str, str, Mapping[str, int]], Awaitable[None]]
"""``write(experiment, day, counts)``: add the counts to the experiment's counters of that UTC day."""
Pairs = Sequence[tuple[str, Mapping[str, Any]]]
WritePairs = Callable[[Pairs], Awaitable[Pairs]]
"""``write_pairs([(experiment, pair), …])``: append the pairs to their experiments' streams; returns the
pairs that could not be appended."""


class Tally:
    def __init__(
        self,
        write: Write,
        write_pairs: WritePairs,
        *,
        every: float | None = None,
        trouble: RedisTrouble | None = None,
    ) -> None:
        """``every``: seconds between two flushes (``FLUSH_SECONDS``, as it is when the tally is made);
        ``trouble``: where failed writes are logged and counted (by default: logged, rate-limited)."""
        self._write = write
        self._write_pairs = write_pairs
        self._every = FLUSH_SECONDS if every is None else every
        self._trouble = trouble or RedisTrouble()
        self._counts: dict[tuple[str, str], Counter[str]] = {}
        self._pairs: list[tuple[str, Mapping[str, Any]]] = []
        self.dropped_pairs = 0
        self._task: asyncio.Task[None] | None = None

    def add(self, experiment: str, now_ms: int, field: str, amount: int = 1) -> None:
        key = (experiment, day_of(now_ms))
        counts = self._counts.get(key)
        if counts is None:
            counts = self._counts[key] = Counter()
        counts[field] += amount
        self._started()

    def add_pair(self, experiment: str, pair: dict[str, Any]) -> None:
        if len(self._pairs) >= MAX_PENDING_PAIRS:
            self.dropped_pairs += 1
            return
        self._pairs.append((experiment, pair))
        self._started()

    def _started(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="experiment_tally")

    def pending(self) -> dict[tuple[str, str], dict[str, int]]:
        return {key: dict(counts) for key, counts in self._counts.items()}

    async def flush(self) -> None:
        """The counters first, then the pairs: whoever finds a pair finds the counts made with it."""
        counts, self._counts = self._counts, {}
        for (experiment, day), fields in counts.items():
            try:
                await self._write(experiment, day, fields)
            except Exception as exc:  # Redis away or in error: the counts wait for the next flush
                self._trouble.note(experiment, "traffic", exc, fallback="kept for the next flush")
                kept = self._counts.setdefault((experiment, day), Counter())
                kept.update(fields)
        pairs, self._pairs = self._pairs, []
        if pairs:
            try:
                failed = await self._write_pairs(pairs)
            except Exception as exc:  # Redis away or in error: the pairs wait for the next flush
                for experiment in sorted({name for name, _ in pairs}):
                    self._trouble.note(experiment, "pairs", exc, fallback="kept for the next flush")
                failed = pairs
            if failed:
                if len(failed) < len(pairs):
                    log.warning("experiment_pairs_failed", pairs=len(failed), error="some appends failed")
                self._pairs[:0] = failed[: MAX_PENDING_PAIRS - len(self._pairs)]

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self._every)
            await self.flush()

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        await self.flush()
