"""Archive benchmark: the drainer's events/s from Redis into PostgreSQL, an export's events/s streamed back
from PostgreSQL (the events read back, and the CSV, NDJSON and FOCUS files), and a month's summary over
1M events from the daily rollups.

Run: ``nice -n 19 .venv/bin/python -m tests.bench.bench_archive [--events N] [--summary-events N]``. It
starts its own Redis (the embedded server) and uses a database of its own on the PostgreSQL that
``tests.postgres`` finds (the one at 127.0.0.1:5432, else an embedded one), dropped at the end.
Targets: drainer ≥ 10,000 events/s; export ≥ 50,000 events/s; a month's summary over 1M events well
under a second.

The machine's speed varies from hour to hour (other work shares its cores), so the run starts and ends
with a calibration: the best of seven timings of a plain Python loop of 100,000 additions. Compare runs
by it: a run whose loop took 1.7 times as long ran on a machine 1.7 times slower.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
import timeit
from pathlib import Path

import psycopg

from gateway.config.schema.ledger import LedgerConfig
from gateway.ledger.apply import EventApplier
from gateway.ledger.archive_reader import ArchiveReader
from gateway.ledger.archive_schema import ensure_schema, partition_name
from gateway.ledger.archive_store import ArchiveStore
from gateway.ledger.drainer import ArchiveDrainer
from gateway.ledger.event import CostEvent
from gateway.ledger.focus import units
from gateway.ledger.keys import LedgerKeys
from gateway.ledger.period import MS_PER_DAY, Period
from gateway.ledger.source import ExportFormat
from gateway.ledger.summary import GROUPS, summarize, total
from gateway.redis.connect import redis_client
from gateway.redis.server import EmbeddedRedis
from tests.ports import free_port
from tests.postgres import Schemas, test_database

DEC_1 = 1_796_083_200_000  # 2026-12-01T00:00:00Z
TENANTS = [f"tenant-{n:02d}" for n in range(8)]
CPU: dict[str, float] = {}
"""The benchmark process's own CPU seconds per step (PostgreSQL's and Redis's are apart)."""


def calibration() -> float:
    """Milliseconds of a plain Python loop of 100,000 additions, the best of seven."""
    timings = timeit.repeat("for i in range(100_000): x += i", setup="x = 0", repeat=7, number=20)
    return min(timings) / 20 * 1000


def make_events(count: int) -> list[CostEvent]:
    """Events as a gateway writes them: half tagged and in a tracked conversation, one in ten a side call
    (a summary), one in twenty with a tool use, a quarter with the client's request id."""
    return [
        CostEvent(
            id=f"bench-{n}:summary:1" if n % 10 == 9 else f"bench-{n}",
            time_ms=DEC_1 + n * 7,
            tenant=TENANTS[n % len(TENANTS)],
            key_id="k1a2b3c4d5e6",
            requested_model="gpt-5.4",
            model=("gpt-5.4", "gpt-5.4-mini", "gpt-5-nano")[n % 3],
            provider="openai",
            action=("forward", "compress", "forward", "retrieve")[n % 4],
            input_tokens=1200 + n % 900,
            cached_tokens=n % 300,
            output_tokens=250 + n % 80,
            cost_nanos=4_125_000 + n % 1000 + (20_000_000 if n % 20 == 3 else 0),
            counterfactual_nanos=0 if n % 10 == 9 else 5_000_000,
            parent_id=f"bench-{n}" if n % 10 == 9 else None,
            latency_ms=420 + n % 300,
            stream=n % 2 == 0,
            client_request_id=f"client-{n}" if n % 4 == 1 else None,
            counterfactual_basis="forwarded" if n % 2 else "conversation",
            cost_parts=(3_000_000, 75_000, 0, 1_050_000 + n % 1000),
            tool_uses="web_search=2" if n % 20 == 3 else None,
            tool_cost_nanos=20_000_000 if n % 20 == 3 else 0,
            conversation=f"c{n % 977:06x}" if n % 2 else None,
            band="below_warning",
            prompt_tokens=1180 + n % 900,
            upstream_ms=400 + n % 300,
            tags={"team": ("search", "ads", "billing")[n % 3], "feature": "autocomplete"} if n % 2 else None,
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


async def read_back(archive_url: str, period: Period) -> tuple[int, float]:
    """The events read back (what summaries by tag and the dashboard read): returns how many, and the
    seconds it took."""
    reader = ArchiveReader(archive_url)
    started, cpu = time.perf_counter(), time.process_time()
    count = 0
    async for _ in reader.merged_events(TENANTS, period):
        count += 1
    CPU["read"] = time.process_time() - cpu
    return count, time.perf_counter() - started


async def export(archive_url: str, period: Period, fmt: ExportFormat) -> tuple[int, float]:
    """The export file in ``fmt`` (``LedgerSource.export``: what ``GET /admin/costs`` and ``gateway costs
    export`` send): returns its lines (the rows, and the CSV header) and the seconds it took."""
    reader = ArchiveReader(archive_url)
    started, cpu = time.perf_counter(), time.process_time()
    lines = 0
    async for chunk in reader.export(TENANTS, period, fmt):
        lines += chunk.count(b"\n")
    CPU[fmt] = time.process_time() - cpu
    return lines, time.perf_counter() - started


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


EXPORTS: tuple[ExportFormat, ...] = ("csv", "ndjson", "focus")


def expected_lines(events: list[CostEvent], fmt: ExportFormat) -> int:
    if fmt == "focus":
        return 1 + sum(len(units(event)) for event in events)
    return len(events) + (fmt == "csv")


async def main(count: int, summary_count: int) -> None:
    calibrated = [calibration()]
    exported: dict[ExportFormat, float] = {}
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
                read, read_in = await read_back(archive_url, period)
                assert read == count, (read, count)
                for fmt in EXPORTS:
                    lines, exported[fmt] = await export(archive_url, period, fmt)
                    assert lines == expected_lines(events, fmt), (fmt, lines)
                requests, timings = await month_summary(archive_url, summary_count)
                assert requests == summary_count, (requests, summary_count)
        finally:
            server.stop()
    calibrated.append(calibration())
    rows = [
        (
            f"drainer, Redis → PostgreSQL ({count:,} events)",
            f"{moved / drained_in:,.0f} events/s",
            "≥ 10,000/s",
        ),
        ("  per CPU second of the drainer's process", f"{moved / CPU['drain']:,.0f} events/s", ""),
        (f"events read back ({count:,})", f"{read / read_in:,.0f} events/s", "-"),
        ("  per CPU second of the reading process", f"{read / CPU['read']:,.0f} events/s", ""),
        *(
            row
            for fmt in EXPORTS
            for row in (
                (f"export as {fmt} ({count:,})", f"{count / exported[fmt]:,.0f} events/s", "≥ 50,000/s"),
                ("  per CPU second of the reading process", f"{count / CPU[fmt]:,.0f} events/s", ""),
            )
        ),
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
    print(
        "calibration, a plain Python loop of 100,000 additions: "
        f"{calibrated[0]:.2f} ms before, {calibrated[1]:.2f} ms after"
    )
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
