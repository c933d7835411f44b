"""The drainer: copies the cost streams from Redis into the PostgreSQL archive, in the background.

It reads each tenant's monthly cost stream through the consumer group ``archive`` (``XREADGROUP``),
inserts what it read into the archive in one transaction (``ArchiveStore.write``: insert-or-ignore by
event id, rollups in the same transaction), and only then acknowledges the entries (``XACK``). A drain
that stops anywhere (the archive down, the process killed, a Redis failover) leaves the entries it had
not acknowledged pending in the group, and the next drain reads those first (``XREADGROUP … 0``): an
event read twice is archived once, and none is acknowledged before the archive has it.

One drainer runs at a time across all the gateway's processes and instances: the one holding the lease
(a Redis key renewed every turn; another process takes over within ``LEASE_TURNS`` poll intervals of its
holder stopping). All of them read as the same consumer, so a new holder resumes its predecessor's pending
entries. One drainer keeps up with tens of thousands of events a second (``tests/bench/bench_archive.py``),
more than a gateway fleet writes; a single consumer also keeps the trimming below simple and exact.

With ``ledger.redis_keep_days``, the drainer also trims Redis: an event older than that many days leaves
its month's stream and time index once the group has acknowledged it (never before), while the dedup
set and the counters stay for the ledger's retention (budgets and replays need them).

Nothing here is on the request path: requests only ever write to Redis (``gateway.ledger.writer``). The
drainer works in batches and yields to the event loop between chunks of a batch.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from datetime import time as datetime_time
from typing import Any

import structlog
from redis.asyncio import Redis
from redis.exceptions import ResponseError

from gateway.config.schema.ledger import LedgerConfig
from gateway.ledger.archive_rows import Archived, archived
from gateway.ledger.archive_schema import month_bounds
from gateway.ledger.archive_store import ArchiveStore
from gateway.ledger.keys import LedgerKeys
from gateway.ledger.period import MS_PER_DAY, Period, to_ms
from gateway.ledger.reply import integer, text
from gateway.ledger.script import Script
from gateway.redis.replication import refresh_topology

GROUP = "archive"
CONSUMER = "archive"
LEASE_TURNS = 5
DISCOVER_SECONDS = 30.0
TRIM_SECONDS = 300.0
YIELD_EVERY = 500
READ_COUNT = 1_000
"""Entries per read: what a reply holds (and the event loop spends parsing it) stays small."""
MAX_BACKOFF_SECONDS = 30.0

RENEW = Script(
    """
-- KEYS: 1 lease; ARGV: 1 holder, 2 ttl ms. Renews the lease if this holder has it.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"""
)
RELEASE = Script(
    """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""
)


@dataclass(frozen=True, slots=True)
class DrainStats:
    archived: int
    """Events inserted into the archive by this process."""
    duplicates: int
    """Events read again that the archive already had (a resumed drain, a failover): not inserted."""
    rejected: int
    """Stream entries that were no cost event (acknowledged, left in Redis)."""
    trimmed: int
    failures: int
    leading: bool
    archive_up: bool
    streams: int
    last_drain: float | None = None
    """When a drain by this process last worked (its clock's seconds), None before one has."""


def _stream_order(stream_id: str) -> tuple[int, int]:
    milliseconds, _, sequence = stream_id.partition("-")
    return int(milliseconds), int(sequence or 0)


class ArchiveDrainer:
    """``start()`` runs it in the background until ``close()``; ``drain()`` and ``trim()`` are one pass
    each (tests and benchmarks call them directly)."""

    def __init__(
        self,
        redis: Redis,
        store: ArchiveStore,
        *,
        config: LedgerConfig,
        keys: LedgerKeys | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.config = config
        self.keys = keys or LedgerKeys(config.key_prefix)
        self.store = store
        self._redis = redis
        self._clock = clock
        self._holder = uuid.uuid4().hex
        self._streams: dict[str, tuple[str, str]] = {}
        """Every cost stream known to exist → its (tenant, month)."""
        self._pending: set[str] = set()
        """Streams whose entries read but not acknowledged are to be read again first."""
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self._leading = False
        self._up = True
        self._next_discovery = 0.0
        self._next_trim = 0.0
        self._last_drain: float | None = None
        self._counts = dict.fromkeys(("archived", "duplicates", "rejected", "trimmed", "failures"), 0)
        self._log = structlog.get_logger("gateway.ledger.archive")

    def start(self) -> None:
        self._stopping = False
        self._task = asyncio.create_task(self._run(), name="ledger-archive")

    async def close(self, timeout: float = 5.0) -> None:
        """Stop draining (what was read and not acknowledged stays pending for the next drainer) and give
        the lease up."""
        task, self._task = self._task, None
        if task is not None:
            self._stopping = True  # ends the loop even if a library swallows the cancellation
            task.cancel()
            await asyncio.wait({task}, timeout=timeout)
            if not task.done():
                self._log.warning("ledger_archive_not_stopped", seconds=timeout)
        if self._leading:
            with contextlib.suppress(Exception):
                await RELEASE.run(self._redis, [self._lease_key()], [self._holder])
            self._leading = False
        await self.store.close()

    def stats(self) -> DrainStats:
        return DrainStats(
            **self._counts,
            leading=self._leading,
            archive_up=self._up,
            streams=len(self._streams),
            last_drain=self._last_drain,
        )

    async def _run(self) -> None:
        backoff = self.config.archive_poll_seconds
        while not self._stopping:
            full = False
            try:
                if await self.lead():
                    full = await self.drain() >= self.config.archive_batch_size
                    self._last_drain = self._clock()
                    if self._clock() >= self._next_trim:
                        await self.trim()
                        self._next_trim = self._clock() + TRIM_SECONDS
                if not self._up:
                    self._log.info("ledger_archive_up")
                self._up, backoff = True, self.config.archive_poll_seconds
            except Exception as exc:  # the archive or Redis down: nothing is acknowledged, try again later
                self._counts["failures"] += 1
                self._pending = set(self._streams)
                if self._up:
                    self._log.warning("ledger_archive_down", error=str(exc) or type(exc).__name__)
                self._up = False
                await refresh_topology(self._redis)  # a cluster that failed over: ask the promoted replica
                await asyncio.sleep(backoff)
                backoff = min(MAX_BACKOFF_SECONDS, backoff * 2)
                continue
            if not full:
                await asyncio.sleep(self.config.archive_poll_seconds)

    async def lead(self) -> bool:
        """Take or renew the lease; True while this drainer holds it."""
        ttl_ms = int(LEASE_TURNS * self.config.archive_poll_seconds * 1000) + 5_000
        key = self._lease_key()
        if self._leading and await RENEW.run(self._redis, [key], [self._holder, ttl_ms]):
            return True
        taken = bool(await self._redis.set(key, self._holder, nx=True, px=ttl_ms))
        if taken:
            self._log.info("ledger_archive_leading")
            self._pending = set(self._streams)
            self._next_discovery = 0.0
        self._leading = taken
        return taken

    async def drain(self, *, discover: bool = False) -> int:
        """Archive what the cost streams hold beyond what was acknowledged, in batches, until a batch comes
        back short; returns how many events were read (inserted or already there)."""
        await self.discover(every_month=discover or self._clock() >= self._next_discovery)
        moved = 0
        while True:
            batch, taken = await self._collect()
            if not taken:
                return moved
            inserted = await self.store.write(batch)
            self._counts["archived"] += inserted
            self._counts["duplicates"] += len(batch) - inserted
            await self._acknowledge(taken)  # failing here leaves them pending: read again, inserted never
            count = sum(len(ids) for ids in taken.values())
            moved += len(batch)
            if count < self.config.archive_batch_size:
                return moved

    async def discover(self, *, every_month: bool = True) -> None:
        """Find the cost streams not known yet, and give each the consumer group (starting at its first
        entry): of this month for every tenant (each pass), or of every month within the retention (every
        ``DISCOVER_SECONDS``: events replayed late into a past month)."""
        tenants = sorted(text(member) for member in await self._redis.smembers(self.keys.tenants()))
        now_ms = int(self._clock() * 1000)
        back = (self.config.retention_months + 1) * 31 * MS_PER_DAY if every_month else 0
        months = Period(now_ms - back, now_ms + 1).months()
        candidates = [
            (stream, tenant, month)
            for tenant in tenants
            for month in months
            if (stream := self.keys.stream(tenant, month)) not in self._streams
        ]
        for first in range(0, len(candidates), 1000):
            part = candidates[first : first + 1000]
            pipe = self._redis.pipeline(transaction=False)
            for stream, _, _ in part:
                pipe.type(stream)
            for (stream, tenant, month), kind in zip(part, await pipe.execute(), strict=True):
                if text(kind) == "stream":
                    await self._create_group(stream)
                    self._streams[stream] = (tenant, month)
                    self._pending.add(stream)
        if every_month:
            self._next_discovery = self._clock() + DISCOVER_SECONDS

    async def trim(self) -> int:
        """Remove from Redis the events older than ``redis_keep_days`` that the archive has: their stream
        entries and their time index members. Returns how many."""
        cutoff = int(self._clock() * 1000) - self.config.redis_keep_days * MS_PER_DAY
        removed = 0
        for stream, (tenant, month) in sorted(self._streams.items()):
            if month_start_ms(month) >= cutoff:
                continue
            archived = await self._archived_bound(stream)
            if archived is None:
                continue
            order, start, high = self.keys.order(tenant, month), "-", f"({cutoff:013d}"
            while True:
                page = [text(member) for member in await self._redis.zrangebylex(order, start, high, 0, 1000)]
                if not page:
                    break
                done = [member for member in page if archived(member.partition("|")[2])]
                if done:
                    pipe = self._redis.pipeline(transaction=False)
                    pipe.xdel(stream, *(member.partition("|")[2] for member in done))
                    pipe.zrem(order, *done)
                    await pipe.execute()
                    removed += len(done)
                if len(page) < 1000:
                    break
                start = f"({page[-1]}"
        self._counts["trimmed"] += removed
        return removed

    async def _archived_bound(self, stream: str) -> Callable[[str], bool] | None:
        """Which of the stream's entry ids the group has acknowledged (and the archive therefore has)."""
        try:
            groups = await self._redis.xinfo_groups(stream)
        except ResponseError:
            return None
        group = next((found for found in groups if text(found.get("name")) == GROUP), None)
        if group is None:
            return None
        last = _stream_order(text(group.get("last-delivered-id")))
        if integer(group.get("pending")) == 0:
            return lambda stream_id: _stream_order(stream_id) <= last
        summary = await self._redis.xpending(stream, GROUP)
        lowest = _stream_order(text(summary.get("min")))
        return lambda stream_id: _stream_order(stream_id) < lowest

    async def _collect(self) -> tuple[list[Archived], dict[str, list[str]]]:
        """Up to a batch of entries across the streams: first those read before and not acknowledged,
        then new ones. Returns the events and, per stream, every entry id read (to acknowledge)."""
        batch: list[Archived] = []
        taken: dict[str, list[str]] = {}
        size = self.config.archive_batch_size
        for stream in sorted(self._streams):
            while len(batch) < size:
                again, wanted = stream in self._pending, min(READ_COUNT, size - len(batch))
                entries = await self._read(stream, "0" if again else ">", wanted)
                if not entries and again:
                    self._pending.discard(stream)
                    continue
                if not entries:
                    break
                ids = taken.setdefault(stream, [])
                for number, (stream_id, fields) in enumerate(entries):
                    ids.append(stream_id)
                    item = self._parse(stream_id, fields)
                    if item is not None:
                        batch.append(item)
                    if number % YIELD_EVERY == YIELD_EVERY - 1:
                        await asyncio.sleep(0)
                if again:  # pending ones come back until acknowledged: once per batch, the rest next batch
                    if len(entries) < wanted:
                        self._pending.discard(stream)
                    break
        return batch, taken

    async def _read(self, stream: str, since: str, count: int) -> list[tuple[str, Mapping[object, object]]]:
        try:
            reply = await self._redis.xreadgroup(GROUP, CONSUMER, {stream: since}, count=count)
        except ResponseError as exc:
            if "NOGROUP" not in str(exc):
                raise
            self._streams.pop(stream, None)  # expired: found again (from its start) if it comes back
            self._pending.discard(stream)
            return []
        listed: Any = reply.values() if isinstance(reply, dict) else (entries for _, entries in reply or ())
        entries: list[tuple[str, Mapping[object, object]]] = []
        for found in listed:
            if found and isinstance(found[0], list):  # RESP3 answers each stream's entries in a list
                found = found[0]
            entries.extend((text(raw_id), fields or {}) for raw_id, fields in found)
        return entries

    def _parse(self, stream_id: str, fields: Mapping[object, object]) -> Archived | None:
        payload = fields.get(b"event", fields.get("event"))
        try:
            if not isinstance(payload, bytes | str):
                raise ValueError("no event field")
            raw = payload.decode() if isinstance(payload, bytes) else payload
            return archived(stream_id, raw)
        except ValueError as exc:  # orjson's JSONDecodeError is one
            if payload is not None:  # None: an entry trimmed while pending; anything else is foreign
                self._counts["rejected"] += 1
                self._log.error("ledger_archive_entry_rejected", stream_id=stream_id, reason=str(exc))
            return None

    async def _acknowledge(self, taken: Mapping[str, Sequence[str]]) -> None:
        for stream, ids in taken.items():
            for first in range(0, len(ids), 10_000):
                await self._redis.xack(stream, GROUP, *ids[first : first + 10_000])

    async def _create_group(self, stream: str) -> None:
        try:
            await self._redis.xgroup_create(stream, GROUP, id="0")  # no MKSTREAM: never creates a stream
        except ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise

    def _lease_key(self) -> str:
        return f"{self.keys.prefix}:archive:lease"


def month_start_ms(month: str) -> int:
    first, _ = month_bounds(month)
    return to_ms(datetime.combine(first, datetime_time(), UTC))
