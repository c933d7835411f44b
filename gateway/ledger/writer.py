"""The ledger's writing side: ``record()`` on the request path, a background task that batches into Redis.

``record()`` only puts the event on a bounded in-memory queue (or, when that is full, appends it to the
spool): it never waits on Redis. The writer task takes whatever is queued (up to ``batch_size``, after a
short linger), applies it in one pipelined round trip and, when Redis is down or slow, appends the batch
to the spool instead (flushed and fsynced) and probes Redis every ``probe_interval_seconds``. When Redis
answers again the spool is replayed before new batches, and it is replayed at start-up too, including the
spools of processes that died. ``close()`` drains the queue to Redis or, failing that, to the spool.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

import structlog
from redis.asyncio import Redis
from redis.exceptions import RedisError

from gateway.background import wind_down
from gateway.ledger.apply import EventApplier, StoreUnavailable
from gateway.ledger.event import CostEvent
from gateway.ledger.keys import LedgerKeys
from gateway.ledger.schema import LedgerConfig
from gateway.ledger.spool import Spool


@dataclass(frozen=True, slots=True)
class LedgerStats:
    recorded: int
    applied: int
    duplicates: int
    spooled: int
    replayed: int
    rejected: int
    queued: int
    redis_up: bool
    spool_pending: bool


class Ledger:
    """Use as ``async with Ledger(redis, spool_dir=…) as ledger:`` or call ``start()`` and ``close()``."""

    def __init__(
        self,
        redis: Redis,
        *,
        spool_dir: Path,
        config: LedgerConfig | None = None,
        keys: LedgerKeys | None = None,
    ) -> None:
        self.config = config or LedgerConfig()
        self.keys = keys or LedgerKeys(self.config.key_prefix)
        self._redis = redis
        self._applier = EventApplier(redis, keys=self.keys, retention_months=self.config.retention_months)
        self._spool = Spool(spool_dir)
        self._queue: asyncio.Queue[CostEvent] | None = None
        self._task: asyncio.Task[None] | None = None
        self._inflight: Sequence[CostEvent] = ()
        self._redis_up = False
        self._next_probe = 0.0
        self._counts = dict.fromkeys(
            ("recorded", "applied", "duplicates", "spooled", "replayed", "rejected"), 0
        )
        self._log = structlog.get_logger("gateway.ledger")

    async def start(self) -> None:
        claimed = self._spool.claim_orphans()
        if claimed:
            self._log.info("ledger_spool_claimed", segments=claimed)
        self._queue = asyncio.Queue(maxsize=self.config.queue_size)
        await self._probe()
        self._task = asyncio.create_task(self._run(), name="ledger-writer")

    def record(self, event: CostEvent) -> None:
        """Hand an event over: never waits on Redis, never drops it (a full queue spills to the spool)."""
        self._counts["recorded"] += 1
        if self._queue is not None and self._task is not None:
            try:
                self._queue.put_nowait(event)
                return
            except asyncio.QueueFull:
                pass
        self._spool.append([event.to_json()], sync=self._task is None)
        self._counts["spooled"] += 1

    async def drain(self) -> None:
        """Wait until every event recorded so far has left the queue (into Redis or the spool)."""
        if self._queue is not None:
            await self._queue.join()

    async def close(self, timeout: float = 10.0) -> None:
        """Drain the queue to Redis within ``timeout`` seconds; whatever is left goes to the spool."""
        queue, task = self._queue, self._task
        if queue is None or task is None:
            self._spool.close()
            return
        await wind_down(queue, task, timeout)
        self._task = None
        leftover = [*self._inflight]
        while not queue.empty():
            leftover.append(queue.get_nowait())
            queue.task_done()
        if leftover:
            self._spool.append([event.to_json() for event in leftover])
            self._counts["spooled"] += len(leftover)
            self._log.warning("ledger_closed_with_spool", events=len(leftover))
        self._spool.close()

    def stats(self) -> LedgerStats:
        return LedgerStats(
            **self._counts,
            queued=self._queue.qsize() if self._queue is not None else 0,
            redis_up=self._redis_up,
            spool_pending=self._spool.pending,
        )

    async def __aenter__(self) -> Ledger:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def _run(self) -> None:
        assert self._queue is not None
        loop = asyncio.get_running_loop()
        while True:
            if not self._redis_up and loop.time() >= self._next_probe:
                await self._probe()
            if self._redis_up and self._spool.pending:
                await self._replay()
            if self._spool.unsynced:
                await asyncio.to_thread(self._spool.sync)
            batch = await self._next_batch(self._queue)
            self._inflight = batch
            try:
                if batch:
                    await self._write(batch)
            except Exception as exc:  # a bug must not stop the ledger: keep the batch, log, carry on
                self._log.exception("ledger_writer_failed", events=len(batch))
                self._down(exc)
                await asyncio.to_thread(self._spool.append, [event.to_json() for event in batch])
                self._counts["spooled"] += len(batch)
            self._inflight = ()
            for _ in batch:
                self._queue.task_done()

    async def _next_batch(self, queue: asyncio.Queue[CostEvent]) -> list[CostEvent]:
        wait = None if self._redis_up else self.config.probe_interval_seconds
        try:
            first = await asyncio.wait_for(queue.get(), wait)
        except TimeoutError:
            return []
        batch = [first]
        size = self.config.batch_size
        if queue.qsize() < size - 1 and self.config.linger_seconds:
            await asyncio.sleep(self.config.linger_seconds)
        while len(batch) < size and not queue.empty():
            batch.append(queue.get_nowait())
        return batch

    async def _write(self, batch: Sequence[CostEvent]) -> None:
        if self._redis_up:
            try:
                async with asyncio.timeout(self.config.write_timeout_seconds):
                    result = await self._applier.apply(batch)
            except (StoreUnavailable, TimeoutError) as exc:
                self._down(exc)
            else:
                self._counts["applied"] += result.applied
                self._counts["duplicates"] += result.duplicates
                self._set_aside(result.rejected)
                return
        lines = [event.to_json() for event in batch]
        await asyncio.to_thread(self._spool.append, lines)
        self._counts["spooled"] += len(batch)

    async def _replay(self) -> None:
        """Apply the sealed spool segments, oldest first; stop (and keep them) if Redis fails again."""
        for segment in self._spool.seal():
            for lines in self._spool.read(segment, batch=self.config.batch_size):
                events = self._parse(lines)
                try:
                    async with asyncio.timeout(self.config.write_timeout_seconds):
                        result = await self._applier.apply(events)
                except (StoreUnavailable, TimeoutError) as exc:
                    self._down(exc)
                    return
                self._counts["replayed"] += result.applied
                self._counts["duplicates"] += result.duplicates
                self._set_aside(result.rejected)
            self._spool.discard(segment)
            self._log.info("ledger_spool_replayed", segment=segment.path.name)

    def _parse(self, lines: Sequence[bytes]) -> list[CostEvent]:
        events = []
        for line in lines:
            try:
                events.append(CostEvent.from_json(line))
            except (ValueError, TypeError) as exc:
                self._spool.reject(line, f"unreadable spool line: {exc}")
                self._counts["rejected"] += 1
        return events

    def _set_aside(self, rejected: Sequence[tuple[CostEvent, str]]) -> None:
        for event, reason in rejected:
            self._spool.reject(event.to_json(), reason)
            self._log.error("ledger_event_rejected", event_id=event.id, tenant=event.tenant, reason=reason)
        self._counts["rejected"] += len(rejected)

    async def _probe(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(self.config.write_timeout_seconds):
                await self._redis.set(self.keys.probe(), "1", px=60_000)  # a write: answering is not enough
        except (RedisError, OSError, TimeoutError) as exc:
            self._down(exc)
            return
        if not self._redis_up:
            self._log.info("ledger_redis_up")
        self._redis_up = True
        self._next_probe = loop.time()

    def _down(self, exc: BaseException) -> None:
        if self._redis_up:
            self._log.warning("ledger_redis_down", error=str(exc) or type(exc).__name__)
        self._redis_up = False
        self._next_probe = asyncio.get_running_loop().time() + self.config.probe_interval_seconds
