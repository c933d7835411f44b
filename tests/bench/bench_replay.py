"""Replay benchmark: events per second through ``gateway replay``'s reading and re-deciding, and its memory.

Run: ``.venv/bin/python -m tests.bench.bench_replay [--events N] [--redis-url URL]``. Without a URL it starts
its own Redis (the embedded server) in a temporary directory. It writes N cost events of a varied traffic
(forwarded, compressed with a summary call, rerouted, failed; prompts from 1K to 300K tokens) through the
ledger's applier, then replays them under a candidate with another warning line and reports events/s,
the time a month of 1M events would take at that rate, and the peak RSS before and after (constant memory:
the replay itself holds sums and a bounded map of recent ids). ``--compute-only`` times the replay without
Redis (events generated in memory), to separate reading from deciding.
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import redis.asyncio as aioredis

from gateway.analysis.replay import replay
from gateway.config.runtime import build_engine
from gateway.config.schema.root import GatewayConfig
from gateway.ledger.apply import EventApplier
from gateway.ledger.event import CostEvent
from gateway.ledger.keys import LedgerKeys
from gateway.ledger.period import Period
from gateway.ledger.reader import LedgerReader
from gateway.redis.server import EmbeddedRedis
from tests.factories import make_config
from tests.ports import free_port

START_MS = 1_795_000_000_000  # 2026-11-18
PROMPTS = (1_200, 8_000, 40_000, 120_000, 210_000, 240_000, 258_000, 300_000)


def traffic(count: int, tenant: str) -> Iterator[CostEvent]:
    for n in range(count):
        prompt = PROMPTS[n % len(PROMPTS)] + n % 997
        compressed = prompt > 250_000
        common = {
            "tenant": tenant, "key_id": "k1", "requested_model": "gpt-5.4", "provider": "mock",
            "time_ms": START_MS + n * 2,
        }  # fmt: skip
        yield CostEvent(
            id=f"r{n}",
            model="gpt-5.4",
            action="compress" if compressed else "forward",
            prompt_tokens=prompt,
            band="warning" if compressed else "below_warning",
            input_tokens=75_000 if compressed else prompt,
            cached_tokens=0 if compressed else prompt // 2,
            output_tokens=300 + n % 200,
            cost_nanos=1_000_000 + n % 5000,
            counterfactual_nanos=2_000_000,
            counterfactual_cached_tokens=prompt // 2,
            counterfactual_basis="conversation" if compressed else "forwarded",
            status=502 if n % 50 == 0 else 200,
            cost_parts=(500_000, 100_000, 0, 400_000),
            **common,  # type: ignore[arg-type]
        )
        if compressed:
            yield CostEvent(
                id=f"r{n}:summary:1", parent_id=f"r{n}", model="small", action="summary",
                input_tokens=prompt - 75_000, output_tokens=2_000, cost_nanos=90_000, **common,  # type: ignore[arg-type]
            )  # fmt: skip


def candidate() -> tuple[GatewayConfig, object]:
    config = GatewayConfig.model_validate(
        make_config(policies={"bands": {"gpt-5.4": {"warning_tokens": 200_000}}, "default": {"name": "d"}})
    )
    return config, build_engine(config)


async def fill(redis: aioredis.Redis, keys: LedgerKeys, tenant: str, count: int) -> int:
    applier = EventApplier(redis, keys=keys, retention_months=120)
    batch: list[CostEvent] = []
    written = 0
    for event in traffic(count, tenant):
        batch.append(event)
        if len(batch) == 1000:
            await applier.apply(batch)
            written += len(batch)
            batch = []
    if batch:
        await applier.apply(batch)
        written += len(batch)
    return written


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def measure(url: str, count: int) -> None:
    redis = aioredis.Redis.from_url(url)
    keys = LedgerKeys(f"bench-{uuid.uuid4().hex[:8]}")
    tenant = "bench"
    try:
        started = time.perf_counter()
        written = await fill(redis, keys, tenant, count)
        print(f"wrote {written:,} events in {time.perf_counter() - started:.1f} s")
        config, engine = candidate()
        reader = LedgerReader(redis, keys=keys)
        period = Period(START_MS, START_MS + count * 2 + 1)
        before = rss_mb()
        started = time.perf_counter()
        result = await replay(lambda: reader.merged_events([tenant], period), config, engine)  # type: ignore[arg-type]
        seconds = time.perf_counter() - started
        report(result.events, seconds, before)
    finally:
        await redis.aclose()


def report(events: int, seconds: float, rss_before: float) -> None:
    rate = events / seconds
    print(f"replayed {events:,} events in {seconds:.1f} s: {rate:,.0f} events/s")
    print(f"1M events at that rate: {1_000_000 / rate / 60:.1f} min")
    print(f"peak RSS {rss_before:.0f} MB before the replay, {rss_mb():.0f} MB after")


async def compute_only(count: int) -> None:
    async def stream() -> AsyncIterator[CostEvent]:
        for event in traffic(count, "bench"):
            yield event

    config, engine = candidate()
    before = rss_mb()
    started = time.perf_counter()
    result = await replay(stream, config, engine)  # type: ignore[arg-type]
    report(result.events, time.perf_counter() - started, before)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--events", type=int, default=100_000, help="requests written (plus their side calls)"
    )
    parser.add_argument("--redis-url")
    parser.add_argument("--compute-only", action="store_true")
    args = parser.parse_args()
    if args.compute_only:
        asyncio.run(compute_only(args.events))
        return
    if args.redis_url:
        asyncio.run(measure(args.redis_url, args.events))
        return
    with tempfile.TemporaryDirectory() as directory:
        server = EmbeddedRedis(Path(directory), port=free_port(), persist=False)
        url = server.start()
        try:
            asyncio.run(measure(url, args.events))
        finally:
            server.stop()


if __name__ == "__main__":
    main()
