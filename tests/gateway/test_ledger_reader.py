"""Reading the ledger back from a real Redis: time order, periods, paging, summaries, usage, memory."""

from __future__ import annotations

import csv
import random
import tracemalloc
from decimal import Decimal
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from gateway.config.schema.ledger import BudgetConfig
from gateway.ledger.apply import EventApplier
from gateway.ledger.budget import Budgets
from gateway.ledger.event import CostEvent
from gateway.ledger.formats import encode_events
from gateway.ledger.keys import LedgerKeys
from gateway.ledger.period import MS_PER_DAY, Period, day_of
from gateway.ledger.reader import LedgerReader
from gateway.ledger.summary import Counters, summarize, total
from tests.gateway.test_ledger_event import NOV_30_NOON, make_event

NOV_1 = NOV_30_NOON - 29 * MS_PER_DAY - 12 * 3_600_000
NOVEMBER = Period(NOV_1, NOV_1 + 30 * MS_PER_DAY)


async def store(redis: aioredis.Redis, events: list[CostEvent], *, keys: LedgerKeys | None = None) -> None:
    applier = EventApplier(redis, keys=keys or LedgerKeys(), retention_months=13)
    for first in range(0, len(events), 1000):
        result = await applier.apply(events[first : first + 1000])
        assert not result.rejected


async def listed(reader: LedgerReader, tenant: str, period: Period = NOVEMBER) -> list[CostEvent]:
    return [event async for event in reader.events(tenant, period)]


@pytest.mark.anyio
async def test_reader_lists_in_event_time_even_when_replayed_late(
    redis_client: aioredis.Redis, tenant_name: str
) -> None:
    events = [make_event(n, tenant=tenant_name) for n in range(100)]
    late = events[10::9]  # spooled during an outage: written long after the others
    await store(redis_client, [e for e in events if e not in late])
    await store(redis_client, list(reversed(late)))
    reader = LedgerReader(redis_client, page_size=5)
    assert [e.id for e in await listed(reader, tenant_name)] == [e.id for e in events]


@pytest.mark.anyio
async def test_reader_pages_through_events_sharing_a_millisecond(
    redis_client: aioredis.Redis, tenant_name: str
) -> None:
    events = [make_event(n, tenant=tenant_name, time_ms=NOV_30_NOON + n // 10) for n in range(95)]
    await store(redis_client, events)
    found = await listed(LedgerReader(redis_client, page_size=7), tenant_name)
    assert sorted(e.id for e in found) == sorted(e.id for e in events)
    assert [e.time_ms for e in found] == sorted(e.time_ms for e in events)


@pytest.mark.anyio
async def test_reader_period_is_half_open_and_spans_months(
    redis_client: aioredis.Redis, tenant_name: str
) -> None:
    times = [NOV_1 - 1, NOV_1, NOV_30_NOON, NOV_1 + 30 * MS_PER_DAY - 1, NOV_1 + 30 * MS_PER_DAY]
    events = [make_event(n, tenant=tenant_name, time_ms=at) for n, at in enumerate(times)]
    await store(redis_client, events)
    reader = LedgerReader(redis_client)
    assert [e.time_ms for e in await listed(reader, tenant_name)] == times[1:4]
    autumn = Period(NOV_1 - MS_PER_DAY, NOV_1 + 31 * MS_PER_DAY)
    assert [e.time_ms for e in await listed(reader, tenant_name, autumn)] == times


@pytest.mark.anyio
async def test_reader_merges_tenants_in_time_order(redis_client: aioredis.Redis) -> None:
    keys = LedgerKeys(f"test-{random.getrandbits(40):x}")
    tenants = ["alpha", "beta", "gamma"]
    events = [make_event(n, tenant=tenants[n * 7 % 3], time_ms=NOV_30_NOON + n * 13 % 50) for n in range(60)]
    await store(redis_client, events, keys=keys)
    reader = LedgerReader(redis_client, keys=keys, page_size=4)
    assert await reader.tenants() == tenants
    merged = [event async for event in reader.merged_events(tenants, NOVEMBER)]
    assert sorted(e.id for e in merged) == sorted(e.id for e in events)
    assert [e.time_ms for e in merged] == sorted(e.time_ms for e in events)


@pytest.mark.anyio
@pytest.mark.parametrize("group_by", ["tenant", "model", "day"])
async def test_summary_groups_match_the_events(redis_client: aioredis.Redis, group_by: str) -> None:
    keys = LedgerKeys(f"test-{random.getrandbits(40):x}")
    events = [
        make_event(n, tenant=["alpha", "beta"][n % 2], time_ms=NOV_30_NOON - (n % 3) * MS_PER_DAY)
        for n in range(90)
    ]
    await store(redis_client, events, keys=keys)
    reader = LedgerReader(redis_client, keys=keys)
    rows = await summarize(reader, tenants=["alpha", "beta"], period=NOVEMBER, group_by=group_by)  # type: ignore[arg-type]

    def group_of(event: CostEvent) -> str:
        return {"tenant": event.tenant, "model": event.model, "day": day_of(event.time_ms)}[group_by]

    assert [row.key for row in rows] == sorted({group_of(e) for e in events})
    for row in rows:
        mine = [e for e in events if group_of(e) == row.key]
        assert row.counters.requests == len(mine)
        assert row.counters.cost_nanos == sum(e.cost_nanos for e in mine)
        assert row.counters.saving_nanos == sum(e.saving_nanos for e in mine)
        assert row.counters.cached_tokens == sum(e.cached_tokens for e in mine)
    assert total(rows).cost_nanos == sum(e.cost_nanos for e in events)


@pytest.mark.anyio
async def test_reader_usage_shows_spend_reservations_and_budget(
    redis_client: aioredis.Redis, tenant_name: str
) -> None:
    now = NOV_30_NOON
    await store(
        redis_client,
        [
            make_event(1, tenant=tenant_name, time_ms=now, cost_nanos=30),
            make_event(2, tenant=tenant_name, time_ms=now - MS_PER_DAY, cost_nanos=12),
            make_event(3, tenant=tenant_name, time_ms=now - 30 * MS_PER_DAY, cost_nanos=1000),  # October
        ],
    )
    budget = BudgetConfig(monthly_usd=Decimal(10))
    await Budgets(redis_client, budget_of=lambda _: budget, clock=lambda: now / 1000).reserve(
        tenant_name, "r", 5
    )
    usage = await LedgerReader(redis_client, budget_of=lambda _: budget).usage(tenant_name, now_ms=now)
    assert (usage.day, usage.month) == ("2026-11-30", "2026-11")
    assert (usage.today.cost_nanos, usage.today.requests) == (30, 1)
    assert (usage.this_month.cost_nanos, usage.this_month.requests) == (42, 2)
    assert usage.reserved_nanos == 5
    assert usage.budget == budget


@pytest.mark.anyio
async def test_reader_exports_100_pages_with_the_memory_of_2(
    redis_client: aioredis.Redis, tenant_name: str, tmp_path: Path
) -> None:
    """Pages of 100 events and chunks of 16 KiB (the gateway's: 1,000 and 64 KiB) keep the run short while
    the export spans 50 times the pages of the small one (``tests.bench.bench_export``: the gateway's
    sizes, over 100,000 events)."""
    count, page = 10_000, 100
    events = [make_event(n, tenant=tenant_name, time_ms=NOV_1 + n * 2_000) for n in range(count)]  # ~5 h
    await store(redis_client, events)
    expected_cost = sum(e.cost_nanos for e in events)
    del events
    reader = LedgerReader(redis_client, page_size=page)

    async def export(period: Period, path: Path) -> int:
        tracemalloc.start()
        try:
            with path.open("wb") as out:
                rows = reader.events(tenant_name, period)
                async for chunk in encode_events(rows, "csv", chunk_bytes=2**14):
                    out.write(chunk)
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    small_peak = await export(Period(NOV_1, NOV_1 + 2 * page * 2_000), tmp_path / "small.csv")  # 2 pages
    peak = await export(NOVEMBER, tmp_path / "all.csv")
    size = (tmp_path / "all.csv").stat().st_size
    assert peak < 2 * 2**20, f"peak {peak / 2**20:.1f} MiB"
    mib = f"2 pages: {small_peak / 2**20:.2f} MiB, all: {peak / 2**20:.2f} MiB"
    assert peak < small_peak * 1.25 + 2**18, mib
    assert size > 2 * peak  # the export is bigger than anything held at once

    with (tmp_path / "all.csv").open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == count
    assert len({row["id"] for row in rows}) == count
    assert sum(Decimal(row["cost_usd"]) for row in rows) * 10**9 == expected_cost
    days = await summarize(reader, tenants=[tenant_name], period=NOVEMBER, group_by="day")
    assert sum((row.counters for row in days), Counters()).cost_nanos == expected_cost
    assert [row["time"] for row in rows] == sorted(row["time"] for row in rows)
