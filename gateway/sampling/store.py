"""Writing samples: a bounded in-process queue and a background task that pipelines capped XADDs.

``record(signal)`` never waits: it puts the signal on the queue, or counts it as dropped when the queue is
full. The writer task takes the first sample queued, waits ``linger_seconds`` for more (unless ``batch_size``
are already there, or ``drain()`` or ``close()`` asks for them now: ``gateway.base.pace``), and sends up to
``batch_size`` in one pipelined round trip, ``XADD gw:samples:{model} MAXLEN ~ N``, reading every reply
(``gateway.redis.pipelined``): on a Redis Cluster one node can fail while the others write. What was not
written is held and tried again, first, every ``retry_interval_seconds`` until Redis takes it; while Redis is
away new samples join it. The samples held are capped at ``queue_size``: beyond that the oldest are dropped
and counted. Samples are statistics, not money,
so nothing is spooled to disk (the cost ledger is the part that never loses).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import TracebackType

import structlog
from redis.asyncio import Redis
from redis.exceptions import RedisClusterException, RedisError

from gateway.base.background import wind_down
from gateway.base.pace import WritePace
from gateway.config.schema.sampling import SamplingConfig
from gateway.redis import pipelined
from gateway.redis.pipelined import describe
from gateway.sampling.keys import SamplingKeys
from gateway.sampling.signals import Signal

ConfigSource = Callable[[], SamplingConfig]


@dataclass(frozen=True, slots=True)
class Entry:
    """One stream entry to append: the model it belongs to, its key and its fields."""

    model: str
    key: str
    fields: dict[str, str]
    maxlen: int


async def append(redis: Redis, entries: Sequence[Entry], *, keys: SamplingKeys) -> list[Entry]:
    """Append ``entries`` in one pipelined round trip, each stream capped (``MAXLEN ~``); returns the
    entries whose write failed (all of them when the index of models could not be written)."""
    if not entries:
        return []
    async with redis.pipeline(transaction=False) as pipe:
        for entry in entries:
            pipe.xadd(entry.key, entry.fields, maxlen=entry.maxlen, approximate=True)  # type: ignore[arg-type]
        pipe.sadd(keys.models(), *sorted({entry.model for entry in entries}))
        replies = await pipelined.execute(pipe)
    failed = replies.failed
    if failed and failed[-1] == len(entries):  # the models' index: the map would not find these streams
        return list(entries)
    return [entries[position] for position in failed]


def sample_entry(signal: Signal, *, keys: SamplingKeys, maxlen: int) -> Entry:
    return Entry(model=signal.model, key=keys.samples(signal.model), fields=signal.to_fields(), maxlen=maxlen)


@dataclass(frozen=True, slots=True)
class WriterStats:
    recorded: int
    written: int
    dropped_full: int
    """Dropped because the queue was full (Redis slower than the traffic)."""
    dropped_redis: int
    """Dropped because Redis was away for longer than ``queue_size`` samples could be held (or they were
    still unwritten at close)."""
    dropped_error: int
    """Dropped because writing them raised an unexpected error (logged)."""
    queued: int
    redis_up: bool
    held: int = 0
    """Samples whose write failed, waiting to be tried again."""


class SampleWriter:
    """Use as ``async with SampleWriter(redis, config=…) as writer:`` or ``start()`` and ``close()``.

    ``config`` is called for every batch, so a reloaded ``sampling:`` section (caps, prefix) applies at
    once; the queue size is read at start.
    """

    def __init__(self, redis: Redis, *, config: ConfigSource = SamplingConfig) -> None:
        self._redis = redis
        self._config = config
        self._queue: asyncio.Queue[Signal] | None = None
        self._task: asyncio.Task[None] | None = None
        self._redis_up = True
        self._down_until = 0.0
        self._held: list[Entry] = []
        """Samples whose write failed, tried again first (at most ``queue_size``)."""
        self._pace = WritePace()
        self._counts = dict.fromkeys(
            ("recorded", "written", "dropped_full", "dropped_redis", "dropped_error"), 0
        )
        self._log = structlog.get_logger("gateway.sampling")

    async def start(self) -> None:
        self._queue = asyncio.Queue(maxsize=self._config().queue_size)
        self._task = asyncio.create_task(self._run(), name="sample-writer")

    def record(self, signal: Signal) -> None:
        """Hand a signal over; never waits. Dropped (and counted) when the queue is full or not started."""
        self._counts["recorded"] += 1
        if self._queue is None:
            self._counts["dropped_full"] += 1
            return
        try:
            self._queue.put_nowait(signal)
        except asyncio.QueueFull:
            self._counts["dropped_full"] += 1

    async def drain(self) -> None:
        """Wait until every signal recorded so far has been written or dropped."""
        if self._queue is not None:
            with self._pace.hurried():
                await self._queue.join()

    async def close(self, timeout: float = 2.0) -> None:
        """Write what is queued within ``timeout`` seconds; the rest is dropped."""
        queue, task = self._queue, self._task
        if queue is None or task is None:
            return
        with self._pace.hurried():
            await wind_down(queue, task, timeout)
        self._task = None
        if self._held:  # one last try for what failed before
            await self._write([])
        self._counts["dropped_redis"] += queue.qsize() + len(self._held)
        self._held = []
        self._queue = None

    def stats(self) -> WriterStats:
        return WriterStats(
            **self._counts,
            queued=self._queue.qsize() if self._queue is not None else 0,
            redis_up=self._redis_up,
            held=len(self._held),
        )

    async def __aenter__(self) -> SampleWriter:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def _run(self) -> None:
        assert self._queue is not None
        queue = self._queue
        loop = asyncio.get_running_loop()
        while True:
            retry_in = max(0.0, self._down_until - loop.time()) if self._held else None
            config = self._config()
            batch = await _next_batch(
                queue, config.batch_size, timeout=retry_in, linger=config.linger_seconds, pace=self._pace
            )
            try:
                await self._write(batch)
            except Exception:  # a bug must not stop sampling for the life of the process
                self._counts["dropped_error"] += len(batch)
                self._log.exception("sampling_write_failed", samples=len(batch))
            finally:
                for _ in batch:
                    queue.task_done()

    async def _write(self, batch: Sequence[Signal]) -> None:
        """Write the samples held from failed writes, then ``batch``; hold again whatever fails."""
        config = self._config()
        loop = asyncio.get_running_loop()
        keys = SamplingKeys(config.key_prefix)
        entries = [*self._held, *(sample_entry(s, keys=keys, maxlen=config.stream_maxlen) for s in batch)]
        self._held = []
        if not self._redis_up and loop.time() < self._down_until:
            self._hold(entries, cap=config.queue_size)
            return
        error = None
        try:
            async with asyncio.timeout(config.write_timeout_seconds):
                failed = await append(self._redis, entries, keys=keys)
        except (RedisError, RedisClusterException, OSError, TimeoutError) as exc:
            failed, error = entries, describe(exc)
        self._counts["written"] += len(entries) - len(failed)
        if failed:
            self._hold(failed, cap=config.queue_size)
            if self._redis_up:
                reason = error or "some writes failed"
                self._log.warning("sampling_redis_down", error=reason, held=len(failed))
            self._redis_up = False
            self._down_until = loop.time() + config.retry_interval_seconds
            return
        if not self._redis_up:
            self._log.info("sampling_redis_up", dropped=self._counts["dropped_redis"])
        self._redis_up = True

    def _hold(self, entries: Sequence[Entry], *, cap: int) -> None:
        """Keep ``entries`` for the next try: the newest ``cap`` of them; older ones are dropped, counted."""
        overflow = len(entries) - cap
        if overflow > 0:
            self._counts["dropped_redis"] += overflow
            entries = entries[overflow:]
        self._held = list(entries)


async def _next_batch(
    queue: asyncio.Queue[Signal], size: int, *, timeout: float | None, linger: float, pace: WritePace
) -> list[Signal]:
    """The next signals queued, up to ``size``, the first having waited ``linger`` seconds for the others
    (less when ``size`` are there or ``pace`` is hurried); none when ``timeout`` passes first (held samples
    are due)."""
    try:
        first = await asyncio.wait_for(queue.get(), timeout)
    except TimeoutError:
        return []
    if queue.qsize() < size - 1:
        await pace.wait(linger)
    batch = [first]
    while len(batch) < size and not queue.empty():
        batch.append(queue.get_nowait())
    return batch
