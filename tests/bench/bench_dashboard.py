"""Dashboard benchmark: how long the page takes to answer for a month of recorded events, on a real Redis.

Run: ``.venv/bin/python -m tests.bench.bench_dashboard [--events N] [--tenants T] [--redis-url URL]``.
Without a URL it starts its own Redis (the embedded server's Valkey) in a temporary directory. The events
spread over the last 21 days; the page reads the whole days from the daily counters, today's events one by
one, and at most ``figures.SCAN_LIMIT`` events for the action mix, the bands and the conversations.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
import uuid
from pathlib import Path

import httpx
import redis.asyncio as aioredis
from fastapi import FastAPI, Request

from gateway.dashboard.figures import SCAN_LIMIT
from gateway.dashboard.routes import dashboard_router
from gateway.dashboard.view import ReportLink
from gateway.ledger.apply import EventApplier
from gateway.ledger.event import CostEvent
from gateway.ledger.keys import LedgerKeys
from gateway.ledger.period import MS_PER_DAY, day_of
from gateway.ledger.reader import LedgerReader
from gateway.redis.server import EmbeddedRedis
from tests.ports import free_port

KEY = "bench-admin-key"


def events(count: int, tenants: int, *, now_ms: int) -> list[CostEvent]:
    month_start = now_ms - (now_ms % MS_PER_DAY) - 20 * MS_PER_DAY
    span = now_ms - month_start
    return [
        CostEvent(
            id=f"bench-{n}",
            time_ms=month_start + n * span // count,
            tenant=f"tenant-{n % tenants}",
            key_id="k1a2b3c4d5e6",
            requested_model="gpt-5.4",
            model=("gpt-5.4", "gpt-5.4-mini", "gpt-5-nano")[n % 3],
            provider="openai",
            action=("forward", "forward", "compress", "retrieve")[n % 4],
            input_tokens=1200 + n % 900,
            output_tokens=250 + n % 80,
            cost_nanos=4_125_000 + n % 1000,
            counterfactual_nanos=5_000_000,
            counterfactual_basis="conversation",
            band=("below_warning", "warning")[n % 2],
            conversation=f"p{n % 5000:06x}",
        )
        for n in range(count)
    ]


async def timed(client: httpx.AsyncClient, params: dict[str, str]) -> float:
    started = time.perf_counter()
    answer = await client.get("/admin/dashboard", params=params)
    assert answer.status_code == 200, answer.text[:200]
    return time.perf_counter() - started


async def main(count: int, tenants: int, redis_url: str | None) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        server = None
        if redis_url is None:
            server = EmbeddedRedis(Path(scratch) / "redis", port=free_port(), persist=False)
            redis_url = server.start()
        redis = aioredis.Redis.from_url(redis_url)
        try:
            keys = LedgerKeys(f"bench-{uuid.uuid4().hex[:8]}")
            now_ms = int(time.time() * 1000)
            recorded = events(count, tenants, now_ms=now_ms)
            applier = EventApplier(redis, keys=keys, retention_months=13)
            for first in range(0, len(recorded), 5000):
                await applier.apply(recorded[first : first + 5000])
            reader = LedgerReader(redis, keys=keys)

            async def links(request: Request) -> list[ReportLink]:
                return []

            app = FastAPI()
            app.include_router(
                dashboard_router(
                    get_admin_key=lambda request: KEY,
                    get_reader=lambda request: reader,
                    tenant_names=lambda request: [],
                    model_names=lambda request: [],
                    report_links=links,
                )
            )
            transport = httpx.ASGITransport(app=app)
            headers = {"authorization": f"Bearer {KEY}"}
            async with httpx.AsyncClient(
                transport=transport, base_url="http://bench", headers=headers, timeout=600
            ) as client:
                span = {"period": "custom", "from": day_of(recorded[0].time_ms)}
                rows = [
                    ("today", await timed(client, {"period": "today"})),
                    ("21 days", await timed(client, span)),
                    ("21 days, one tenant", await timed(client, {**span, "tenant": "tenant-0"})),
                ]
        finally:
            await redis.aclose()
            if server is not None:
                server.stop()
    print(f"dashboard benchmark: {count:,} events over 21 days, {tenants} tenants, scan limit {SCAN_LIMIT:,}")
    for name, seconds in rows:
        print(f"  {name:<24} {seconds:8.2f} s")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--tenants", type=int, default=10)
    parser.add_argument("--redis-url", help="an existing Redis (default: start one)")
    options = parser.parse_args()
    asyncio.run(main(options.events, options.tenants, options.redis_url))
