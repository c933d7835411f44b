"""Export benchmark: a tenant's events read back from Redis and written as CSV (``gateway costs export``'s
path: ``LedgerReader.events`` and ``encode_events``) at the gateway's page and chunk sizes: the peak memory
the export allocates, against an export of two pages (what the test suite checks at smaller sizes:
``tests/gateway/test_ledger_reader.py``), and the events per second while tracemalloc watches (several
times slower than an export without it).

Run: ``nice -n 19 .venv/bin/python -m tests.bench.bench_export [--events N]`` (100,000 by default). It starts
its own Redis (the embedded server) in a temporary directory. Target: the peak stays that of two pages,
whatever the number of events.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
import tracemalloc
from pathlib import Path

import redis.asyncio as aioredis

from gateway.ledger.formats import encode_events
from gateway.ledger.period import MS_PER_DAY, Period
from gateway.ledger.reader import LedgerReader
from gateway.redis.server import EmbeddedRedis
from tests.gateway.test_ledger_event import make_event
from tests.gateway.test_ledger_reader import NOV_1, store
from tests.ports import free_port

TENANT = "bench-export"


async def export(reader: LedgerReader, period: Period, path: Path) -> tuple[int, float]:
    """The peak bytes allocated while exporting, and the seconds it took."""
    tracemalloc.start()
    started = time.perf_counter()
    try:
        with path.open("wb") as out:
            async for chunk in encode_events(reader.events(TENANT, period), "csv"):
                out.write(chunk)
        return tracemalloc.get_traced_memory()[1], time.perf_counter() - started
    finally:
        tracemalloc.stop()


async def run(count: int, directory: Path) -> None:
    with EmbeddedRedis(directory / "redis", port=free_port(), persist=False) as server:
        redis = aioredis.Redis.from_url(server.url)
        try:
            step = max(1, 30 * MS_PER_DAY // count)  # the events spread over a month
            await store(redis, [make_event(n, tenant=TENANT, time_ms=NOV_1 + n * step) for n in range(count)])
            reader = LedgerReader(redis)
            two_pages = Period(NOV_1, NOV_1 + 2 * reader.page_size * step)
            small, _ = await export(reader, two_pages, directory / "small.csv")
            month = Period(NOV_1, NOV_1 + 31 * MS_PER_DAY)
            peak, seconds = await export(reader, month, directory / "all.csv")
            size = (directory / "all.csv").stat().st_size
        finally:
            await redis.aclose()
    print(f"events            {count:,}")
    print(f"export            {seconds:.2f} s, {count / seconds:,.0f} events/s, {size / 2**20:.1f} MiB CSV")
    print(f"peak, two pages   {small / 2**20:.2f} MiB")
    print(f"peak, all         {peak / 2**20:.2f} MiB ({peak / small:.2f}x two pages')")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        asyncio.run(run(args.events, Path(directory)))


if __name__ == "__main__":
    main()
