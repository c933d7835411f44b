"""The ledger writer against real Redis servers: batching, Redis going away and coming back, the spool."""

from __future__ import annotations

import asyncio
import errno
import inspect
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson
import pytest
import redis.asyncio as aioredis

from gateway.base.background import wind_down
from gateway.config.schema.ledger import LedgerConfig
from gateway.ledger.event import CostEvent
from gateway.ledger.keys import LedgerKeys
from gateway.ledger.period import day_of, month_of
from gateway.ledger.spool import REJECTED
from gateway.ledger.summary import read_counters
from gateway.ledger.writer import Ledger
from gateway.redis.server import EmbeddedRedis
from tests.gateway.test_ledger_event import make_event
from tests.ports import free_port

KEYS = LedgerKeys()
FAST = LedgerConfig(probe_interval_seconds=0.05, write_timeout_seconds=0.5, linger_seconds=0.001)

CRASH_WHILE_SPOOLING = """
import asyncio, os, signal, sys
from pathlib import Path
import redis.asyncio as aioredis
from gateway.config.schema.ledger import LedgerConfig
from gateway.ledger.writer import Ledger
from tests.gateway.test_ledger_event import make_event

async def main():
    redis = aioredis.Redis.from_url(sys.argv[2], socket_connect_timeout=0.2)
    ledger = Ledger(redis, spool_dir=Path(sys.argv[1]), config=LedgerConfig(write_timeout_seconds=0.3))
    await ledger.start()
    for number in range(int(sys.argv[4])):
        ledger.record(make_event(number, tenant=sys.argv[3]))
    await ledger.drain()
    assert ledger.stats().spooled == int(sys.argv[4]), ledger.stats()
    os.kill(os.getpid(), signal.SIGKILL)  # a crash: no close(), nothing flushed by an orderly exit

asyncio.run(main())
"""


def spooled_events(spool_dir: Path) -> list[CostEvent]:
    return [
        CostEvent.from_json(line)
        for path in spool_dir.glob("*.jsonl")
        if path.name != REJECTED
        for line in path.read_bytes().splitlines()
    ]


async def wait_for_failures(ledger: Ledger, count: int, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while ledger.stats().failures < count:
        assert time.monotonic() < deadline, f"the writer never failed {count} times: {ledger.stats()}"
        await asyncio.sleep(0.01)


def break_spool(spool_dir: Path) -> None:
    """A file where the spool directory was: no segment can be created (ENOENT/EEXIST, as a full disk)."""
    spool_dir.rmdir()
    spool_dir.write_bytes(b"")


def mend_spool(spool_dir: Path) -> None:
    spool_dir.unlink()
    spool_dir.mkdir()


async def wait_until_spooled(ledger: Ledger, count: int, timeout: float = 20.0) -> None:
    """Until ``count`` events are spooled and the ledger takes Redis for down."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        stats = ledger.stats()
        if stats.spooled == count and not stats.redis_up:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"the ledger did not spool {count} events: {ledger.stats()}")


async def wait_until_settled(ledger: Ledger, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        await ledger.drain()
        stats = ledger.stats()
        if stats.redis_up and not stats.spool_pending and stats.queued == 0:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"the ledger did not settle: {ledger.stats()}")


async def assert_exactly_once(redis: aioredis.Redis, events: Sequence[CostEvent]) -> None:
    """Every event in its stream once, and every daily counter equal to the sum of its events."""
    by_tenant_month: dict[tuple[str, str], list[CostEvent]] = {}
    for event in events:
        by_tenant_month.setdefault((event.tenant, month_of(event.time_ms)), []).append(event)
    for (tenant, month), expected in by_tenant_month.items():
        entries: Any = await redis.xrange(KEYS.stream(tenant, month))
        stored = [CostEvent.from_json(fields[b"event"]) for _, fields in entries]
        assert len(stored) == len(expected)
        assert sorted(e.id for e in stored) == sorted(e.id for e in expected)
    by_day: dict[tuple[str, str], list[CostEvent]] = {}
    for event in events:
        by_day.setdefault((event.tenant, day_of(event.time_ms)), []).append(event)
    for (tenant, day), expected in by_day.items():
        counters = read_counters(await redis.hgetall(KEYS.daily(tenant, day)))
        assert counters[""].requests == len(expected)
        assert counters[""].cost_nanos == sum(e.cost_nanos for e in expected)
        assert counters[""].saving_nanos == sum(e.saving_nanos for e in expected)
        assert counters[""].output_tokens == sum(e.output_tokens for e in expected)
        for model in {e.model for e in expected}:
            assert counters[model].cost_nanos == sum(e.cost_nanos for e in expected if e.model == model)


@pytest.mark.anyio
async def test_ledger_writes_events_in_batches(
    redis_client: aioredis.Redis, tenant_name: str, tmp_path: Path
) -> None:
    events = [make_event(n, tenant=tenant_name) for n in range(1200)]
    async with Ledger(redis_client, spool_dir=tmp_path, config=FAST) as ledger:
        for event in events:
            ledger.record(event)
        await ledger.drain()
        stats = ledger.stats()
    assert (stats.recorded, stats.applied, stats.spooled) == (1200, 1200, 0)
    await assert_exactly_once(redis_client, events)
    assert list(tmp_path.glob("*.jsonl")) == []


@pytest.mark.anyio
async def test_an_event_finding_the_writer_idle_goes_at_once_and_the_next_waits_out_the_rest(
    redis_client: aioredis.Redis, tenant_name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    events = [make_event(n, tenant=tenant_name) for n in range(3)]
    ledger = Ledger(redis_client, spool_dir=tmp_path, config=LedgerConfig(linger_seconds=1))
    batches: list[int] = []
    apply = ledger._applier.apply

    async def counted(batch: Sequence[CostEvent]) -> Any:
        batches.append(len(batch))
        return await apply(batch)

    monkeypatch.setattr(ledger._applier, "apply", counted)
    async with ledger:
        ledger.record(events[0])
        await asyncio.sleep(0)  # the writer takes it: nothing was written in the last second, so it goes
        ledger.record(events[1])  # comes while the first is written: waits for the rest of the second
        while ledger.stats().applied < 1:
            await asyncio.sleep(0)
        ledger.record(events[2])  # joins the one waiting
        await ledger.drain()  # ends the wait
        assert batches == [1, 2]
    await assert_exactly_once(redis_client, events)


@pytest.mark.anyio
async def test_ledger_survives_redis_restart_with_every_event_once(tmp_path: Path, tenant_name: str) -> None:
    server = EmbeddedRedis(tmp_path / "redis", port=free_port(), persist=True)
    server.start()
    redis = aioredis.Redis.from_url(server.url, socket_connect_timeout=0.2, socket_timeout=0.5)
    events = [
        make_event(n, tenant=tenant_name, time_ms=make_event(n).time_ms + n * 60_000) for n in range(1000)
    ]
    try:
        async with Ledger(redis, spool_dir=tmp_path / "spool", config=FAST) as ledger:
            for number, event in enumerate(events):
                ledger.record(event)
                if number == 400:
                    await asyncio.to_thread(server.stop)  # Redis goes away with writes in flight
                if number == 700:
                    assert not ledger.stats().redis_up
                    assert ledger.stats().spooled > 0
                    await asyncio.to_thread(server.start)
                if number % 10 == 0:
                    await asyncio.sleep(0.002)  # requests keep flowing meanwhile
            await wait_until_settled(ledger)
            stats = ledger.stats()
        assert stats.spooled > 0 and stats.replayed > 0
        await assert_exactly_once(redis, events)
        assert list((tmp_path / "spool").glob("*.jsonl")) == []
    finally:
        await redis.aclose()
        server.stop()


@pytest.mark.anyio
async def test_ledger_replays_the_spool_of_a_crashed_process(
    redis_client: aioredis.Redis, tenant_name: str, tmp_path: Path, dead_redis_url: str
) -> None:
    crashed = subprocess.run(
        [sys.executable, "-c", CRASH_WHILE_SPOOLING, str(tmp_path), dead_redis_url, tenant_name, "300"],
        cwd=Path.cwd(),
        capture_output=True,
        timeout=60,
    )
    assert crashed.returncode == -9, crashed.stderr.decode()
    assert sum(len(p.read_bytes().splitlines()) for p in tmp_path.glob("*.jsonl")) == 300

    async with Ledger(redis_client, spool_dir=tmp_path, config=FAST) as ledger:
        await wait_until_settled(ledger)
        assert ledger.stats().replayed == 300
    await assert_exactly_once(redis_client, [make_event(n, tenant=tenant_name) for n in range(300)])
    assert list(tmp_path.glob("*.jsonl")) == []


@pytest.mark.anyio
async def test_ledger_replay_of_already_applied_events_counts_nothing_twice(
    redis_client: aioredis.Redis, tenant_name: str, tmp_path: Path
) -> None:
    events = [make_event(n, tenant=tenant_name) for n in range(50)]
    async with Ledger(redis_client, spool_dir=tmp_path, config=FAST) as ledger:
        for event in events:
            ledger.record(event)
    # a process that died mid-replay left a segment whose events are (partly) in Redis already
    (tmp_path / "00000000000000000001-1.jsonl").write_bytes(
        b"".join(e.to_json() + b"\n" for e in events[10:])
    )
    async with Ledger(redis_client, spool_dir=tmp_path, config=FAST) as ledger:
        await wait_until_settled(ledger)
        assert (ledger.stats().replayed, ledger.stats().duplicates) == (0, 40)
    await assert_exactly_once(redis_client, events)


@pytest.mark.anyio
async def test_ledger_full_queue_spills_to_the_spool_and_replays(
    redis_client: aioredis.Redis, tenant_name: str, tmp_path: Path
) -> None:
    events = [make_event(n, tenant=tenant_name) for n in range(500)]
    config = LedgerConfig(queue_size=20, batch_size=20, probe_interval_seconds=0.05)
    async with Ledger(redis_client, spool_dir=tmp_path, config=config) as ledger:
        for event in events:  # no await: the writer cannot run, so the queue overflows
            ledger.record(event)
        assert ledger.stats().spooled == 480
        await wait_until_settled(ledger)
        assert ledger.stats().applied + ledger.stats().replayed == 500
    await assert_exactly_once(redis_client, events)


@pytest.mark.anyio
async def test_ledger_close_spools_what_redis_cannot_take(
    dead_redis: aioredis.Redis, tenant_name: str, tmp_path: Path
) -> None:
    events = [make_event(n, tenant=tenant_name) for n in range(25)]
    ledger = Ledger(dead_redis, spool_dir=tmp_path, config=FAST)
    await ledger.start()
    for event in events:
        ledger.record(event)
    await ledger.close(timeout=5)
    ledger.record(make_event(99, tenant=tenant_name))  # after close: straight to the spool, synced
    spooled = spooled_events(tmp_path)
    assert sorted(e.id for e in spooled) == sorted(e.id for e in [*events, make_event(99)])


@pytest.mark.anyio
async def test_ledger_close_spools_an_event_waiting_out_the_linger(
    dead_redis: aioredis.Redis, tenant_name: str, tmp_path: Path
) -> None:
    config = LedgerConfig(linger_seconds=1, probe_interval_seconds=30)
    ledger = Ledger(dead_redis, spool_dir=tmp_path, config=config)
    await ledger.start()
    ledger.record(make_event(1, tenant=tenant_name))  # written at once (to the spool: Redis is down)
    await asyncio.sleep(0)
    ledger.record(make_event(2, tenant=tenant_name))
    while ledger.stats().queued:  # the writer takes it, then lingers for a fuller batch
        await asyncio.sleep(0)
    await ledger.close(timeout=0.01)
    assert sorted(event.id for event in spooled_events(tmp_path)) == sorted(make_event(n).id for n in (1, 2))


@pytest.mark.anyio
async def test_ledger_writer_outlives_a_spool_it_cannot_write(
    dead_redis: aioredis.Redis, tenant_name: str, tmp_path: Path
) -> None:
    spool = tmp_path / "spool"
    events = [make_event(n, tenant=tenant_name) for n in range(20)]
    ledger = Ledger(dead_redis, spool_dir=spool, config=FAST)
    await ledger.start()
    try:
        break_spool(spool)  # Redis is down and the disk fails: the batch has nowhere to go
        for event in events[:10]:
            ledger.record(event)
        await wait_for_failures(ledger, 2)  # it tried again, so the first failure did not end the task
        mend_spool(spool)
        for event in events[10:]:
            ledger.record(event)
        async with asyncio.timeout(20):
            await ledger.drain()
    finally:
        await ledger.close(timeout=5)
    assert ledger.stats().spooled == 20
    assert sorted(e.id for e in spooled_events(spool)) == sorted(e.id for e in events)


@pytest.mark.anyio
async def test_ledger_close_spools_the_batch_a_failed_write_kept(
    dead_redis: aioredis.Redis, tenant_name: str, tmp_path: Path
) -> None:
    spool = tmp_path / "spool"
    events = [make_event(n, tenant=tenant_name) for n in range(10)]
    ledger = Ledger(dead_redis, spool_dir=spool, config=LedgerConfig(probe_interval_seconds=30))
    await ledger.start()
    break_spool(spool)
    for event in events:
        ledger.record(event)
    await wait_for_failures(ledger, 2)  # the write and the spool failed: the batch is kept, 30 s to retry
    mend_spool(spool)
    await ledger.close(timeout=0.01)
    assert sorted(e.id for e in spooled_events(spool)) == sorted(e.id for e in events)


@pytest.mark.anyio
async def test_wind_down_logs_what_the_writer_task_raised_and_returns() -> None:
    queue: asyncio.Queue[int] = asyncio.Queue()
    queue.put_nowait(1)

    async def failing_writer() -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    task = asyncio.create_task(failing_writer())
    await asyncio.wait([task])
    await wind_down(queue, task, timeout=30)  # the task cannot empty the queue: no wait, no raise
    assert queue.qsize() == 1  # what is left is the caller's


@pytest.mark.anyio
async def test_ledger_sets_aside_events_redis_refuses(
    redis_client: aioredis.Redis, tenant_name: str, tmp_path: Path
) -> None:
    good = make_event(1, tenant=tenant_name)
    refused = make_event(2, tenant=tenant_name, time_ms=good.time_ms - 86_400_000)
    await redis_client.set(KEYS.daily(tenant_name, day_of(refused.time_ms)), "someone else's string")
    async with Ledger(redis_client, spool_dir=tmp_path, config=FAST) as ledger:
        ledger.record(good)
        ledger.record(refused)
        await ledger.drain()
        assert (ledger.stats().applied, ledger.stats().rejected) == (1, 1)
    [record] = (tmp_path / REJECTED).read_bytes().splitlines()
    assert CostEvent.from_json(orjson.loads(record)["line"]) == refused
    assert "WRONGTYPE" in orjson.loads(record)["reason"]


@pytest.mark.anyio
async def test_ledger_record_never_waits_for_a_dead_redis(
    dead_redis: aioredis.Redis, tenant_name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert not inspect.iscoroutinefunction(Ledger.record)  # it cannot await Redis
    fsyncs: list[int] = []
    real_fsync = os.fsync
    config = FAST.model_copy(update={"queue_size": 500})
    async with Ledger(dead_redis, spool_dir=tmp_path, config=config) as ledger:
        with monkeypatch.context() as patched:
            patched.setattr(os, "fsync", lambda fd: fsyncs.append(fd) or real_fsync(fd))
            for number in range(1000):
                ledger.record(make_event(number, tenant=tenant_name))
        # handed over without the writer running: half queued, half spilled, and no fsync waited on
        assert (ledger.stats().queued, ledger.stats().spooled, fsyncs) == (500, 500, [])
        await ledger.drain()
        assert ledger.stats().spooled == 1000
    assert os.listdir(tmp_path)


@pytest.mark.anyio
async def test_ledger_spools_while_redis_is_too_slow_then_catches_up(
    tmp_path: Path, tenant_name: str
) -> None:
    with EmbeddedRedis(tmp_path / "redis", port=free_port(), persist=False) as server:
        redis = aioredis.Redis.from_url(server.url)
        admin = aioredis.Redis.from_url(server.url)
        events = [make_event(n, tenant=tenant_name) for n in range(300)]
        try:
            async with Ledger(redis, spool_dir=tmp_path / "spool", config=FAST) as ledger:
                await admin.execute_command("CLIENT", "PAUSE", "60000", "WRITE")  # writes hang until unpaused
                for event in events[:150]:
                    ledger.record(event)
                await wait_until_spooled(ledger, 150)  # a write timed out: the ledger spools
                await admin.execute_command("CLIENT", "UNPAUSE")
                for event in events[150:]:
                    ledger.record(event)
                await wait_until_settled(ledger)
            await assert_exactly_once(redis, events)
        finally:
            await redis.aclose()
            await admin.aclose()
