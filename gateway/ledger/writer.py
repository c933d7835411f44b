"""The ledger's writing side: ``record()`` on the request path, a background task that batches into Redis.

``record()`` only puts the event on a bounded in-memory queue (or, when that is full, appends it to the
spool): it never waits on Redis. The writer task takes whatever is queued (up to ``batch_size``), applies
it in one pipelined round trip and, when Redis is down or slow, appends the batch
to the spool instead (flushed and fsynced) and probes Redis every ``probe_interval_seconds``. When Redis
answers again the spool is replayed before new batches, and it is replayed at start-up too, including the
spools of processes that died. ``close()`` drains the queue to Redis or, failing that, to the spool.

On a Redis Cluster a batch counts as written once a replica confirms it (``WAIT``): a master killed before
passing a write on loses it when its replica is promoted. A batch the master took but no replica confirmed
in time is kept in memory and applied again (the apply script is idempotent) every probe interval until a
replica confirms it; if the master dies meanwhile, the batch goes to the spool and is replayed on the
promoted replica. After ``replica_confirm_seconds`` of a replica that never catches up (none left, say), the
batch counts as written, as on a single Redis, with a warning.

No failure stops the writer task: when a turn raises (a full or failing disk under a dead Redis, a bug),
it is logged, the batch in hand goes to the spool or, if even that fails, stays in memory, and the task
tries again a probe interval later.

The writer writes at most once every ``linger_seconds`` (``gateway.base.pace``): an event that finds it idle
is written at once, one that comes sooner waits for the rest of the period with those queued after it. A
round trip costs the worker about as much CPU as a fifth of a small request. ``drain()`` and ``close()`` cut
the wait short.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

import structlog
from redis.asyncio import Redis
from redis.exceptions import RedisError

from gateway.base.background import wind_down
from gateway.base.pace import WritePace
from gateway.config.schema.ledger import LedgerConfig
from gateway.ledger.apply import EventApplier, StoreUnavailable
from gateway.ledger.event import CostEvent
from gateway.ledger.keys import LedgerKeys
from gateway.ledger.spool import Spool
from gateway.redis.replication import refresh_topology


@dataclass(frozen=True, slots=True)
class LedgerStats:
    recorded: int
    applied: int
    duplicates: int
    spooled: int
    replayed: int
    rejected: int
    failures: int
    """Writer turns that raised, and spool writes after them that failed (all logged): the batch in hand
    was kept for the next try."""
    queued: int
    redis_up: bool
    spool_pending: bool
    unreplicated: int = 0
    """On a Redis Cluster: events a master took that no replica confirmed within ``replica_confirm_seconds``
    of applying them again (logged)."""
    unconfirmed: int = 0
    """Events a master took that no replica has confirmed yet: applied again until one does."""
    in_hand: int = 0
    """Events taken off the queue and not yet in Redis or the spool: waiting out the linger, or being
    written."""

    @property
    def unwritten(self) -> int:
        """Every event recorded and not yet in Redis or the spool."""
        return self.queued + self.in_hand


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
        self._inflight: list[CostEvent] = []
        """Taken off the queue, not yet in Redis or the spool: ``close()`` spools them too."""
        self._redis_up = False
        self._next_probe = 0.0
        self._pace = WritePace()
        self._unconfirmed: list[CostEvent] = []
        """Taken by a master, not yet confirmed by a replica: applied again until one does."""
        self._unconfirmed_since = 0.0
        self._next_confirm = 0.0
        self._counts = dict.fromkeys(
            (
                "recorded",
                "applied",
                "duplicates",
                "spooled",
                "replayed",
                "rejected",
                "failures",
                "unreplicated",
            ),
            0,
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
            with self._pace.hurried():
                await self._queue.join()

    async def close(self, timeout: float = 10.0) -> None:
        """Drain the queue to Redis within ``timeout`` seconds; whatever is left goes to the spool."""
        queue, task = self._queue, self._task
        if queue is None or task is None:
            self._spool.close()
            return
        with self._pace.hurried():
            await wind_down(queue, task, timeout)
        self._task = None
        await self._confirm_at_close(timeout)
        leftover, self._inflight = self._inflight, []
        while not queue.empty():
            leftover.append(queue.get_nowait())
            queue.task_done()
        if leftover:
            self._spool_leftover(leftover)
        self._spool.close()

    def _spool_leftover(self, events: Sequence[CostEvent]) -> None:
        try:
            self._spool.append([event.to_json() for event in events])
        except OSError:  # the last place left for them is the log, one line each, in full
            self._log.exception("ledger_spool_failed_at_close", events=len(events))
            for event in events:
                self._log.error("ledger_event_unwritten", event=event.to_json().decode())
            return
        self._counts["spooled"] += len(events)
        self._log.warning("ledger_closed_with_spool", events=len(events))

    def stats(self) -> LedgerStats:
        return LedgerStats(
            **self._counts,
            queued=self._queue.qsize() if self._queue is not None else 0,
            redis_up=self._redis_up,
            spool_pending=self._spool.pending,
            unconfirmed=len(self._unconfirmed),
            in_hand=len(self._inflight),
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
        queue = self._queue
        while True:
            try:
                await self._turn(queue)
            except Exception:  # nothing may stop the ledger: log, keep the batch, carry on
                self._counts["failures"] += 1
                self._log.exception("ledger_writer_failed", events=len(self._inflight))
                await self._keep(queue)

    async def _turn(self, queue: asyncio.Queue[CostEvent]) -> None:
        """Probe, replay, sync the spool, then write the batch in hand (kept by a failed turn) or the next."""
        if not self._redis_up and asyncio.get_running_loop().time() >= self._next_probe:
            await self._probe()
        if self._redis_up and self._spool.pending:
            await self._replay()
        if self._spool.unsynced:
            await asyncio.to_thread(self._spool.sync)
        if self._redis_up and self._unconfirmed and asyncio.get_running_loop().time() >= self._next_confirm:
            await self._confirm()
        if not self._inflight:
            await self._next_batch(queue)
        if self._inflight:
            await self._write(self._inflight)
            self._done(queue)

    async def _keep(self, queue: asyncio.Queue[CostEvent]) -> None:
        """After a failed turn: the batch in hand goes to the spool, or, when even that fails, it stays in
        hand for the next turn, a probe interval later."""
        if self._inflight:
            try:
                await asyncio.to_thread(self._spool.append, [event.to_json() for event in self._inflight])
            except Exception:
                self._counts["failures"] += 1
                self._log.exception("ledger_spool_failed", events=len(self._inflight))
            else:
                self._counts["spooled"] += len(self._inflight)
                self._done(queue)
                return
        await asyncio.sleep(self.config.probe_interval_seconds)

    def _done(self, queue: asyncio.Queue[CostEvent]) -> None:
        batch, self._inflight = self._inflight, []
        for _ in batch:
            queue.task_done()

    async def _next_batch(self, queue: asyncio.Queue[CostEvent]) -> None:
        """Take the next batch into ``_inflight``, each event as it leaves the queue (so one waiting out
        the linger is in hand when ``close()`` looks)."""
        wait = None if self._redis_up and not self._unconfirmed else self.config.probe_interval_seconds
        try:
            first = await asyncio.wait_for(queue.get(), wait)
        except TimeoutError:
            return
        batch = self._inflight = [first]
        size = self.config.batch_size
        await self._pace.next_turn(self.config.linger_seconds, full=queue.qsize() >= size - 1)
        while len(batch) < size and not queue.empty():
            batch.append(queue.get_nowait())

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
                if result.unconfirmed:
                    self._hold_unconfirmed(batch)
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
                if result.unconfirmed:
                    self._hold_unconfirmed(events)
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

    def _hold_unconfirmed(self, events: Sequence[CostEvent]) -> None:
        now = asyncio.get_running_loop().time()
        if not self._unconfirmed:
            self._unconfirmed_since = now
            self._next_confirm = now + self.config.probe_interval_seconds
        self._unconfirmed.extend(events)

    async def _confirm(self) -> None:
        """Apply the unconfirmed events again: done once a replica confirms them (its ``WAIT`` covers the
        earlier writes too); to the spool if the master is gone (replayed on the one promoted); counted as
        written, with a warning, once ``replica_confirm_seconds`` have passed."""
        events, lagged = self._unconfirmed, False
        size = self.config.batch_size
        for start in range(0, len(events), size):
            try:
                async with asyncio.timeout(self.config.write_timeout_seconds):
                    result = await self._applier.apply(events[start : start + size])
            except (StoreUnavailable, TimeoutError) as exc:
                self._down(exc)
                await self._spool_unconfirmed()
                return
            if result.applied:  # the master that had them is gone, and its replica had not got them
                self._log.warning("ledger_rewritten_after_failover", events=result.applied)
            lagged = lagged or result.unconfirmed
        now = asyncio.get_running_loop().time()
        if not lagged:
            self._unconfirmed = []
        elif now - self._unconfirmed_since >= self.config.replica_confirm_seconds:
            self._log.warning("ledger_write_unreplicated", events=len(events))
            self._counts["unreplicated"] += len(events)
            self._unconfirmed = []
        else:
            self._next_confirm = now + self.config.probe_interval_seconds

    async def _spool_unconfirmed(self) -> None:
        """Kept in memory until the spool has them (a failing disk leaves them for the next try)."""
        await asyncio.to_thread(self._spool.append, [event.to_json() for event in self._unconfirmed])
        self._counts["spooled"] += len(self._unconfirmed)
        self._unconfirmed = []

    async def _confirm_at_close(self, timeout: float) -> None:
        """One last try to have a replica confirm what is unconfirmed; what still is not goes to the spool
        (replayed at the next start: applying it again counts nothing twice)."""
        if not self._unconfirmed:
            return
        with contextlib.suppress(Exception):
            async with asyncio.timeout(timeout):
                if self._redis_up:
                    self._next_confirm = 0.0
                    await self._confirm()
        if self._unconfirmed:
            self._spool_leftover(self._unconfirmed)
            self._unconfirmed = []

    async def _probe(self) -> None:
        loop = asyncio.get_running_loop()
        await refresh_topology(self._redis)  # a cluster that failed over: write to the promoted replica
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
