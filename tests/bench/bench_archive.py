"""Archive benchmark: the drainer's events/s from Redis into PostgreSQL, an export's events/s streamed back
from PostgreSQL, and a month's summary over 1M events from the daily rollups.

Run: ``nice -n 19 .venv/bin/python -m tests.bench.bench_archive [--events N] [--summary-events N]``. It
starts its own Redis (the embedded server) and uses a database of its own on the PostgreSQL that
``tests.postgres`` finds (the one at 127.0.0.1:5432, else an embedded one), dropped at the end.
Targets: drainer ≥ 10,000 events/s; export ≥ 50,000 events/s; a month's summary over 1M events well
under a second.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from pathlib import Path

import psycopg

from gateway.config.schema.ledger import LedgerConfig
from gateway.ledger.apply import EventApplier
from gateway.ledger.archive_reader import ArchiveReader
from gateway.ledger.archive_store import ArchiveStore, ensure_schema, partition_name
from gateway.ledger.drainer import ArchiveDrainer
from gateway.ledger.event import CostEvent
from gateway.ledger.formats import encode_events
from gateway.ledger.keys import LedgerKeys
from gateway.ledger.period import MS_PER_DAY, Period
from gateway.ledger.summary import GROUPS, summarize, total
from gateway.redis.connect import redis_client
from gateway.redis.server import EmbeddedRedis, free_port
from tests.postgres import Schemas, test_database

DEC_1 = 1_796_083_200_000  # 2026-12-01T00:00:00Z
TENANTS = [f"tenant-{n:02d}" for n in range(8)]
CPU: dict[str, float] = {}
"""The benchmark process's own CPU seconds per step (PostgreSQL's and Redis's are apart)."""


def make_events(count: int) -> list[CostEvent]:
    return [
        CostEvent(
            id=f"bench-{n}",
            time_ms=DEC_1 + n * 7,
            tenant=TENANTS[n % len(TENANTS)],
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
            cost_parts=(3_000_000, 75_000, 0, 1_050_000 + n % 1000),
        )
        for n in range(count)
    ]


async def fill_redis(redis_url: str, keys: LedgerKeys, events: list[CostEvent]) -> None:
    client = redis_client(redis_url, cluster=False)
    applier = EventApplier(client, keys=keys, retention_months=13)
    try:
        for first in range(0, len(events), 1000):
            await applier.apply(events[first : first + 1000])
    finally:
        await client.aclose()


async def drain(redis_url: str, archive_url: str, keys: LedgerKeys) -> tuple[int, float]:
    client = redis_client(redis_url, cluster=False)
    config = LedgerConfig(key_prefix=keys.prefix, archive=archive_url)
    drainer = ArchiveDrainer(
        client, ArchiveStore(archive_url), config=config, keys=keys, clock=lambda: DEC_1 / 1000
    )
    try:
        await drainer.discover()
        started, cpu = time.perf_counter(), time.process_time()
        moved = 0
        while (step := await drainer.drain()) > 0:
            moved += step
        CPU["drain"] = time.process_time() - cpu
        return moved, time.perf_counter() - started
    finally:
        await drainer.close()
        await client.aclose()


async def export(archive_url: str, period: Period, *, encode: bool) -> tuple[int, float]:
    reader = ArchiveReader(archive_url)
    started, cpu = time.perf_counter(), time.process_time()
    count = 0
    if encode:
        async for chunk in encode_events(reader.merged_events(TENANTS, period), "csv"):
            count += chunk.count(b"\r\n")
        count -= 1  # the header
    else:
        async for _ in reader.merged_events(TENANTS, period):
            count += 1
    CPU["csv" if encode else "read"] = time.process_time() - cpu
    return count, time.perf_counter() - started


SYNTHETIC = """
INSERT INTO ledger_events
SELECT DATE '2027-01-01', 'm-' || (n % 20), 'syn-' || n, {start} + n * 2, {start} + n * 2 || '-0', 'k1',
       'model-' || (n % 10), 'openai', 'forward', 1000000 + n % 1000, 1500000, 1000, n % 50, 200, 0,
       jsonb_build_object('id', 'syn-' || n, 'time_ms', {start} + n * 2, 'tenant', 'm-' || (n % 20),
                          'key_id', 'k1', 'requested_model', 'gpt-5.4', 'model', 'model-' || (n % 10),
                          'provider', 'openai', 'action', 'forward', 'cost_nanos', 1000000 + n % 1000)
FROM generate_series(0::bigint, {count} - 1) AS n;
INSERT INTO ledger_daily
SELECT tenant, DATE '1970-01-01' + (time_ms / 86400000)::int, model, count(*), sum(cost_nanos),
       sum(counterfactual_nanos - cost_nanos), sum(input_tokens), sum(cached_tokens), sum(output_tokens),
       sum(reasoning_tokens)
FROM ledger_events WHERE month = DATE '2027-01-01' GROUP BY 1, 2, 3;
INSERT INTO ledger_tenants SELECT DISTINCT tenant FROM ledger_events WHERE month = DATE '2027-01-01'
ON CONFLICT DO NOTHING;
"""


async def month_summary(archive_url: str, count: int) -> tuple[int, dict[str, float]]:
    """``count`` events spread over January 2027 written straight into the archive (its rollups made from
    them in SQL), then the month summarised by each grouping from the rollups."""
    start = 1_798_761_600_000  # 2027-01-01T00:00:00Z
    spacing = 31 * MS_PER_DAY // count
    async with await psycopg.AsyncConnection.connect(archive_url, autocommit=True) as connection:
        await ensure_schema(connection)
        await connection.execute(
            f"CREATE TABLE IF NOT EXISTS {partition_name('2027-01')} PARTITION OF ledger_events "
            "FOR VALUES FROM ('2027-01-01') TO ('2027-02-01')"
        )
        await connection.execute(
            SYNTHETIC.format(start=start, count=count).replace("n * 2", f"n * {spacing}")
        )
    reader = ArchiveReader(archive_url)
    tenants = await reader.tenants()
    january = Period(start, start + 31 * MS_PER_DAY)
    timings: dict[str, float] = {}
    requests = 0
    for group_by in GROUPS:
        began = time.perf_counter()
        rows = await summarize(
            reader, tenants=[t for t in tenants if t.startswith("m-")], period=january, group_by=group_by
        )
        timings[group_by] = time.perf_counter() - began
        requests = total(rows).requests
    return requests, timings


async def main(count: int, summary_count: int) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        server = EmbeddedRedis(Path(scratch) / "redis", port=free_port(), persist=False)
        redis_url = server.start()
        try:
            with test_database(Path(scratch) / "postgres") as database:
                archive_url = Schemas(database).new()
                keys = LedgerKeys("bench")
                events = make_events(count)
                await fill_redis(redis_url, keys, events)
                moved, drained_in = await drain(redis_url, archive_url, keys)
                assert moved == count, (moved, count)
                period = Period(DEC_1, DEC_1 + 31 * MS_PER_DAY)
                read, read_in = await export(archive_url, period, encode=False)
                encoded, encoded_in = await export(archive_url, period, encode=True)
                assert read == encoded == count, (read, encoded, count)
                requests, timings = await month_summary(archive_url, summary_count)
                assert requests == summary_count, (requests, summary_count)
        finally:
            server.stop()
    rows = [
        (
            f"drainer, Redis → PostgreSQL ({count:,} events)",
            f"{moved / drained_in:,.0f} events/s",
            "≥ 10,000/s",
        ),
        ("  per CPU second of the drainer's process", f"{moved / CPU['drain']:,.0f} events/s", ""),
        (f"export, events read back ({count:,})", f"{read / read_in:,.0f} events/s", "≥ 50,000/s"),
        ("  per CPU second of the reading process", f"{read / CPU['read']:,.0f} events/s", ""),
        (f"export, as CSV ({count:,})", f"{encoded / encoded_in:,.0f} events/s", "-"),
        ("  per CPU second of the reading process", f"{encoded / CPU['csv']:,.0f} events/s", ""),
        *(
            (
                f"month summary by {group}, {summary_count:,} events",
                f"{seconds * 1000:,.1f} ms",
                "well under 1 s",
            )
            for group, seconds in timings.items()
        ),
    ]
    width = max(len(name) for name, _, _ in rows)
    print(f"load average while it ran: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"{'archive benchmark':<{width}}  {'measured':>20}  target")
    for name, value, target in rows:
        print(f"{name:<{width}}  {value:>20}  {target}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=200_000, help="events drained and exported")
    parser.add_argument(
        "--summary-events", type=int, default=1_000_000, help="events of the summarised month"
    )
    options = parser.parse_args()
    asyncio.run(main(options.events, options.summary_events))
