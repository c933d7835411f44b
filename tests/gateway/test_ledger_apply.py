"""The apply script against a real Redis: one event, atomically and idempotently, into stream and counters."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from gateway.ledger.apply import EventApplier, StoreUnavailable
from gateway.ledger.keys import LedgerKeys
from gateway.ledger.period import day_of, month_expiry, month_of
from gateway.ledger.summary import read_counters
from gateway.redis.server import EmbeddedRedis
from tests.gateway.test_ledger_event import NOV_30_NOON, make_event
from tests.ports import free_port

KEYS = LedgerKeys()


def applier(redis: aioredis.Redis) -> EventApplier:
    return EventApplier(redis, keys=KEYS, retention_months=13)


@pytest.mark.anyio
async def test_apply_writes_stream_index_and_counters(redis_client: aioredis.Redis, tenant_name: str) -> None:
    events = [make_event(n, tenant=tenant_name) for n in range(30)]
    result = await applier(redis_client).apply(events)
    assert (result.applied, result.duplicates, result.rejected) == (30, 0, ())

    month, day = month_of(NOV_30_NOON), day_of(NOV_30_NOON)
    assert await redis_client.xlen(KEYS.stream(tenant_name, month)) == 30
    assert await redis_client.zcard(KEYS.order(tenant_name, month)) == 30
    counters = read_counters(await redis_client.hgetall(KEYS.daily(tenant_name, day)))
    assert counters[""].cost_nanos == sum(e.cost_nanos for e in events)
    assert counters[""].saving_nanos == sum(e.saving_nanos for e in events)
    assert counters[""].requests == 30
    assert counters[""].input_tokens == sum(e.input_tokens for e in events)
    assert counters[""].reasoning_tokens == sum(e.reasoning_tokens for e in events)
    per_model = Counter(e.model for e in events)
    for model, count in per_model.items():
        assert counters[model].requests == count
        assert counters[model].cost_nanos == sum(e.cost_nanos for e in events if e.model == model)
    monthly = read_counters(await redis_client.hgetall(KEYS.monthly(tenant_name, month)))[""]
    assert (monthly.cost_nanos, monthly.requests) == (counters[""].cost_nanos, 30)
    assert tenant_name.encode() in await redis_client.smembers(KEYS.tenants())


@pytest.mark.anyio
async def test_apply_is_idempotent_across_replays(redis_client: aioredis.Redis, tenant_name: str) -> None:
    events = [make_event(n, tenant=tenant_name) for n in range(10)]
    first = await applier(redis_client).apply(events[:6])
    again = await applier(redis_client).apply(events)  # a replay overlapping what was applied
    assert (first.applied, again.applied, again.duplicates) == (6, 4, 6)
    month = month_of(NOV_30_NOON)
    assert await redis_client.xlen(KEYS.stream(tenant_name, month)) == 10
    daily = read_counters(await redis_client.hgetall(KEYS.daily(tenant_name, day_of(NOV_30_NOON))))[""]
    assert daily.cost_nanos == sum(e.cost_nanos for e in events)
    assert daily.requests == 10


@pytest.mark.anyio
async def test_apply_files_events_under_their_own_day_and_month(
    redis_client: aioredis.Redis, tenant_name: str
) -> None:
    late_november = make_event(1, tenant=tenant_name, time_ms=1_796_083_199_999)  # 2026-11-30T23:59:59.999Z
    early_december = make_event(2, tenant=tenant_name, time_ms=1_796_083_200_000)
    await applier(redis_client).apply([late_november, early_december])
    assert await redis_client.xlen(KEYS.stream(tenant_name, "2026-11")) == 1
    assert await redis_client.xlen(KEYS.stream(tenant_name, "2026-12")) == 1
    assert (
        await redis_client.hget(KEYS.daily(tenant_name, "2026-12-01"), "cost")
        == str(early_december.cost_nanos).encode()
    )


@pytest.mark.anyio
async def test_apply_expires_month_keys_after_retention(
    redis_client: aioredis.Redis, tenant_name: str
) -> None:
    now_ms = int(time.time() * 1000)
    await applier(redis_client).apply([make_event(1, tenant=tenant_name, time_ms=now_ms)])
    month = month_of(now_ms)
    expected = month_expiry(month, retention_months=13)
    for key in (
        KEYS.stream(tenant_name, month),
        KEYS.order(tenant_name, month),
        KEYS.seen(tenant_name, month),
        KEYS.daily(tenant_name, day_of(now_ms)),
        KEYS.monthly(tenant_name, month),
    ):
        remaining = expected - time.time()
        assert abs(await redis_client.ttl(key) - remaining) <= 5, key  # TTL, not EXPIRETIME: Redis 6.2 too


@pytest.mark.anyio
async def test_apply_keeps_model_names_with_colons_apart(
    redis_client: aioredis.Redis, tenant_name: str
) -> None:
    tuned = "ft:gpt-4o-mini:org:custom:abc"
    await applier(redis_client).apply([make_event(1, tenant=tenant_name, model=tuned, cost_nanos=5)])
    counters = read_counters(await redis_client.hgetall(KEYS.daily(tenant_name, day_of(NOV_30_NOON))))
    assert counters[tuned].cost_nanos == 5
    assert counters[tuned].requests == 1


@pytest.mark.anyio
async def test_apply_sets_aside_an_event_redis_refuses(
    redis_client: aioredis.Redis, tenant_name: str
) -> None:
    good, poisoned = make_event(1, tenant=tenant_name), make_event(2, tenant=tenant_name, time_ms=NOV_30_NOON)
    await redis_client.set(KEYS.daily(tenant_name, "2026-11-30"), "not a hash")
    result = await applier(redis_client).apply([good, poisoned])
    assert result.applied == 0
    assert [event.id for event, _ in result.rejected] == [good.id, poisoned.id]
    assert all("WRONGTYPE" in reason for _, reason in result.rejected)


@pytest.mark.anyio
async def test_apply_reloads_the_script_after_a_server_restart(tmp_path: Path, tenant_name: str) -> None:
    with EmbeddedRedis(tmp_path, port=free_port(), persist=False) as server:
        client = aioredis.Redis.from_url(server.url)
        try:
            await client.script_flush()
            result = await applier(client).apply([make_event(1, tenant=tenant_name)])
            assert result.applied == 1
        finally:
            await client.aclose()


@pytest.mark.anyio
async def test_apply_raises_store_unavailable_when_redis_is_gone(
    dead_redis: aioredis.Redis, tenant_name: str
) -> None:
    with pytest.raises(StoreUnavailable):
        await applier(dead_redis).apply([make_event(1, tenant=tenant_name)])
