"""A cost summary reads the daily counters for the whole UTC days of its period and scans events only for
the pieces of a day at its ends, against a real Redis."""

from __future__ import annotations

import random

import pytest
import redis.asyncio as aioredis

from gateway.ledger.apply import EventApplier
from gateway.ledger.keys import LedgerKeys
from gateway.ledger.period import MS_PER_DAY, Period
from gateway.ledger.reader import LedgerReader
from gateway.ledger.summary import basis_of, parts_of, summarize
from tests.gateway.test_ledger_event import make_event

NOV_28 = 1_795_824_000_000
"""2026-11-28T00:00:00Z"""
HOUR = 3_600_000


def test_parts_of_a_period_cut_at_midnights() -> None:
    assert parts_of(Period(NOV_28, NOV_28 + 2 * MS_PER_DAY)).days == Period(NOV_28, NOV_28 + 2 * MS_PER_DAY)
    assert parts_of(Period(NOV_28, NOV_28 + 2 * MS_PER_DAY)).scanned == ()
    mid = parts_of(Period(NOV_28 + 12 * HOUR, NOV_28 + 2 * MS_PER_DAY + 12 * HOUR))
    assert mid.days == Period(NOV_28 + MS_PER_DAY, NOV_28 + 2 * MS_PER_DAY)
    assert mid.scanned == (
        Period(NOV_28 + 12 * HOUR, NOV_28 + MS_PER_DAY),
        Period(NOV_28 + 2 * MS_PER_DAY, NOV_28 + 2 * MS_PER_DAY + 12 * HOUR),
    )
    inside = Period(NOV_28 + HOUR, NOV_28 + 2 * HOUR)
    assert parts_of(inside).days is None and parts_of(inside).scanned == (inside,)


def test_the_basis_says_what_was_read() -> None:
    assert basis_of(Period(NOV_28, NOV_28 + 3 * MS_PER_DAY)) == "daily counters for 2026-11-28 to 2026-11-30"
    assert basis_of(Period(NOV_28, NOV_28 + MS_PER_DAY + HOUR)) == (
        "daily counters for 2026-11-28; events scanned from 2026-11-29T00:00:00Z to 2026-11-29T01:00:00Z"
    )


@pytest.mark.anyio
async def test_whole_days_come_from_the_counters_and_the_ends_from_their_events(
    redis_client: aioredis.Redis,
) -> None:
    keys = LedgerKeys(f"test-{random.getrandbits(40):x}")
    nov_30 = NOV_28 + 2 * MS_PER_DAY
    times = [NOV_28 + HOUR, NOV_28 + 13 * HOUR, NOV_28 + MS_PER_DAY + HOUR, nov_30 + 10 * HOUR]
    times.append(nov_30 + 14 * HOUR)
    events = [
        make_event(n, tenant="alpha", time_ms=at, cost_nanos=1_000 * (n + 1)) for n, at in enumerate(times)
    ]
    await EventApplier(redis_client, keys=keys, retention_months=13).apply(events)
    # a counter that says more than the events: only a read of the counters can see it
    await redis_client.hincrby(keys.daily("alpha", "2026-11-29"), "cost", 1_000_000)
    reader = LedgerReader(redis_client, keys=keys)

    async def cost(period: Period) -> int:
        rows = await summarize(reader, tenants=["alpha"], period=period, group_by="tenant")
        return sum(row.counters.cost_nanos for row in rows)

    try:
        to_noon = await cost(Period(NOV_28, NOV_28 + 2 * MS_PER_DAY + 12 * HOUR))
        from_noon = await cost(Period(NOV_28 + 12 * HOUR, NOV_28 + 2 * MS_PER_DAY))
        three_days = Period(NOV_28 + 12 * HOUR, NOV_28 + 3 * MS_PER_DAY)
        by_day = await summarize(reader, tenants=["alpha"], period=three_days, group_by="day")
    finally:
        await redis_client.delete(*await redis_client.keys(f"{keys.prefix}:*"))
    # 28th and 29th whole (1,000 + 2,000, then 3,000 + the counter's 1,000,000), the 30th until noon: 4,000
    assert to_noon == 1_000 + 2_000 + 1_003_000 + 4_000
    # the 28th from noon: its second event only; the 29th whole from its counter
    assert from_noon == 2_000 + 1_003_000
    assert [(row.key, row.counters.cost_nanos) for row in by_day] == [
        ("2026-11-28", 2_000), ("2026-11-29", 1_003_000), ("2026-11-30", 4_000 + 5_000)
    ]  # fmt: skip
