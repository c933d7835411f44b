"""Ledger benchmark: sustained events/s through the writer into a real Redis, and what ``record()`` adds.

Run: ``.venv/bin/python -m tests.bench.bench_ledger [--events N] [--redis-url URL]``. Without a URL it starts
its own Redis (the embedded server's Valkey) in a temporary directory. Targets: ≥ 10,000 events/s sustained,
``record()`` ≤ 0.1 ms p50.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

import redis.asyncio as aioredis

from gateway.config.schema.ledger import LedgerConfig
from gateway.ledger.event import CostEvent
from gateway.ledger.writer import Ledger
from gateway.redis.server import EmbeddedRedis
from tests.ports import free_port

BURST = 200  # events recorded between two yields to the event loop, as if from that many requests


def events(count: int, tenant: str) -> list[CostEvent]:
    now = int(time.time() * 1000)
    return [
        CostEvent(
            id=f"bench-{n}",
            time_ms=now + n // 100,
            tenant=tenant,
            key_id="k1a2b3c4d5e6",
            requested_model="gpt-5.4",
            model=("gpt-5.4", "gpt-5.4-mini", "gpt-5-nano")[n % 3],
            provider="openai",
            action="forward",
            input_tokens=1200 + n % 900,
            cached_tokens=n % 300,
            output_tokens=250 + n % 80,
            cost_nanos=4_125_000 + n % 1000,
            counterfactual_nanos=5_000_000,
            latency_ms=420,
            stream=n % 2 == 0,
        )
        for n in range(count)
    ]


async def sustained(
    redis: aioredis.Redis, batch: Sequence[CostEvent], spool: Path
) -> tuple[float, list[int]]:
    """Record everything in bursts (timing each ``record()``), then wait until it is all in Redis."""
    latencies: list[int] = []
    async with Ledger(redis, spool_dir=spool, config=LedgerConfig()) as ledger:
        started = time.perf_counter()
        for first in range(0, len(batch), BURST):
            for event in batch[first : first + BURST]:
                before = time.perf_counter_ns()
                ledger.record(event)
                latencies.append(time.perf_counter_ns() - before)
            await asyncio.sleep(0)
        await ledger.drain()
        elapsed = time.perf_counter() - started
        stats = ledger.stats()
    assert stats.applied == len(batch) and stats.spooled == 0, stats
    return len(batch) / elapsed, latencies


async def replay(redis: aioredis.Redis, batch: Sequence[CostEvent], spool: Path) -> tuple[float, float]:
    """Spool everything with Redis unreachable, then time the replay into the real one."""
    dead = aioredis.Redis.from_url(f"redis://127.0.0.1:{free_port()}/0", socket_connect_timeout=0.2)
    async with Ledger(dead, spool_dir=spool, config=LedgerConfig(write_timeout_seconds=0.5)) as ledger:
        started = time.perf_counter()
        for first in range(0, len(batch), BURST):
            for event in batch[first : first + BURST]:
                ledger.record(event)
            await asyncio.sleep(0)
        await ledger.drain()
        spooled = len(batch) / (time.perf_counter() - started)
    await dead.aclose()
    started = time.perf_counter()
    async with Ledger(redis, spool_dir=spool, config=LedgerConfig()) as ledger:
        while ledger.stats().spool_pending:
            await asyncio.sleep(0.005)
        replayed = ledger.stats().replayed
    assert replayed == len(batch), replayed
    return spooled, len(batch) / (time.perf_counter() - started)


def percentile(values: Sequence[int], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] / 1000


async def main(count: int, redis_url: str | None) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        server = None
        if redis_url is None:
            server = EmbeddedRedis(Path(scratch) / "redis", port=free_port(), persist=False)
            redis_url = server.start()
        redis = aioredis.Redis.from_url(redis_url)
        try:
            tenant = f"bench-{uuid.uuid4().hex[:8]}"
            rate, latencies = await sustained(redis, events(count, tenant), Path(scratch) / "spool-a")
            spool_rate, replay_rate = await replay(
                redis, events(count, tenant + "-r"), Path(scratch) / "spool-b"
            )
        finally:
            await redis.aclose()
            if server is not None:
                server.stop()
    rows = [
        ("events recorded", f"{count:,}", ""),
        ("sustained write rate into Redis", f"{rate:,.0f} events/s", "≥ 10,000"),
        ("record() p50", f"{percentile(latencies, 0.50):.2f} µs", "≤ 100 µs"),
        ("record() p99", f"{percentile(latencies, 0.99):.2f} µs", ""),
        ("record() mean", f"{statistics.fmean(latencies) / 1000:.2f} µs", ""),
        ("spool rate, Redis down", f"{spool_rate:,.0f} events/s", ""),
        ("spool replay rate", f"{replay_rate:,.0f} events/s", ""),
    ]
    width = max(len(name) for name, _, _ in rows)
    print(f"{'ledger benchmark':<{width}}  {'measured':>20}  target")
    for name, value, target in rows:
        print(f"{name:<{width}}  {value:>20}  {target}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--redis-url", help="an existing Redis (default: start one)")
    options = parser.parse_args()
    asyncio.run(main(options.events, options.redis_url))
