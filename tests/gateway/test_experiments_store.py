from __future__ import annotations

import time
from collections.abc import AsyncIterator

import orjson
import pytest
import redis.asyncio as aioredis

from gateway.experiments.report.reading import spent_today
from gateway.experiments.store import (
    TRAFFIC_TTL_SECONDS,
    ExperimentKeys,
    add_pair,
    add_pairs,
    add_traffic,
    has_data,
    read_pairs,
    read_traffic,
    read_traffic_days,
)
from gateway.ledger.keys import LedgerKeys
from gateway.ledger.period import day_of
from tests.gateway.experiment_factories import make_pair, make_side

NAME = "mini-on-long-chats"


@pytest.fixture
async def keys(redis_client: aioredis.Redis, tenant_name: str) -> AsyncIterator[ExperimentKeys]:
    """Keys under a prefix of this test's own, deleted afterwards."""
    keys = ExperimentKeys(f"gwtest-{tenant_name}")
    yield keys
    found = [key async for key in redis_client.scan_iter(match=f"{keys.prefix}:*")]
    if found:
        await redis_client.delete(*found)


def test_experiment_keys_share_the_experiment_hash_tag() -> None:
    keys = ExperimentKeys()
    assert keys.pairs("mini") == "gw:{experiment:mini}:pairs"
    assert keys.traffic("mini", "2026-11-30") == "gw:{experiment:mini}:traffic:2026-11-30"
    assert keys.assignment("mini", "c0ffee") == "gw:{experiment:mini}:arm:c0ffee"
    # the same slot as the ledger tenant the experiment's shadow spend is billed to
    assert LedgerKeys().daily("experiment:mini", "2026-11-30") == "gw:{experiment:mini}:daily:2026-11-30"


@pytest.mark.anyio
async def test_store_pairs_round_trip_in_time_order(
    redis_client: aioredis.Redis, keys: ExperimentKeys
) -> None:
    pairs = [
        make_pair(n, tokens=10_000 * (n + 1), primary=make_side(), candidate=make_side("m")) for n in range(3)
    ]
    for pair in pairs:
        await add_pair(redis_client, keys, NAME, pair)
    read = await read_pairs(redis_client, keys, NAME, since_ms=0)
    assert read == pairs
    ttl = await redis_client.ttl(keys.pairs(NAME))
    assert TRAFFIC_TTL_SECONDS - 60 < ttl <= TRAFFIC_TTL_SECONDS


@pytest.mark.anyio
async def test_store_adds_a_batch_of_pairs_to_their_experiments(
    redis_client: aioredis.Redis, keys: ExperimentKeys
) -> None:
    batch = [("a", make_pair(1, tokens=1)), ("b", make_pair(2, tokens=2)), ("a", make_pair(3, tokens=3))]
    await add_pairs(redis_client, keys, batch)
    await add_pairs(redis_client, keys, [])
    assert [pair["id"] for pair in await read_pairs(redis_client, keys, "a", since_ms=0)] == [
        "req_000001",
        "req_000003",
    ]
    assert [pair["id"] for pair in await read_pairs(redis_client, keys, "b", since_ms=0)] == ["req_000002"]
    assert await redis_client.ttl(keys.pairs("b")) > TRAFFIC_TTL_SECONDS - 60


@pytest.mark.anyio
async def test_store_reads_pairs_by_stream_id_window_and_limit(
    redis_client: aioredis.Redis, keys: ExperimentKeys
) -> None:
    """Ids in [since, until): the newest ``limit`` of them, returned oldest first."""
    key = keys.pairs(NAME)
    for n, at in enumerate((1_000, 2_000, 3_000, 4_000, 5_000)):
        await redis_client.xadd(key, {"pair": orjson.dumps(make_pair(n, tokens=1))}, id=f"{at}-0")
    ids = [pair["id"] for pair in await read_pairs(redis_client, keys, NAME, since_ms=2_000, until_ms=5_000)]
    assert ids == ["req_000001", "req_000002", "req_000003"]
    newest = await read_pairs(redis_client, keys, NAME, since_ms=0, limit=2)
    assert [pair["id"] for pair in newest] == ["req_000003", "req_000004"]
    assert await read_pairs(redis_client, keys, NAME, since_ms=6_000) == []


@pytest.mark.anyio
async def test_store_skips_entries_that_are_not_json_objects(
    redis_client: aioredis.Redis, keys: ExperimentKeys
) -> None:
    key = keys.pairs(NAME)
    await redis_client.xadd(key, {"pair": b"{not json"})
    await redis_client.xadd(key, {"pair": b"[1, 2]"})
    await redis_client.xadd(key, {"other": b"{}"})
    await add_pair(redis_client, keys, NAME, make_pair(7, tokens=5))
    read = await read_pairs(redis_client, keys, NAME, since_ms=0)
    assert [pair["id"] for pair in read] == ["req_000007"]


@pytest.mark.anyio
async def test_store_reads_across_pages(redis_client: aioredis.Redis, keys: ExperimentKeys) -> None:
    """More pairs than one page (5,000): every one, once, in order."""
    key = keys.pairs(NAME)
    async with redis_client.pipeline(transaction=False) as pipe:
        for n in range(12_001):
            pipe.xadd(key, {"pair": orjson.dumps({"v": 1, "id": f"r{n}"})}, id=f"{10_000 + n}-0")
        await pipe.execute()
    read = await read_pairs(redis_client, keys, NAME, since_ms=0)
    assert [pair["id"] for pair in read] == [f"r{n}" for n in range(12_001)]
    assert len(await read_pairs(redis_client, keys, NAME, since_ms=0, limit=7_000)) == 7_000


@pytest.mark.anyio
async def test_store_traffic_adds_up_per_day_with_an_expiry(
    redis_client: aioredis.Redis, keys: ExperimentKeys
) -> None:
    await add_traffic(redis_client, keys, NAME, "2026-11-29", {"n:128000": 3, "cost:128000": 900, "shed": 1})
    await add_traffic(
        redis_client, keys, NAME, "2026-11-29", {"n:128000": 2, "cost:128000": 600, "failed": 0}
    )
    await add_traffic(
        redis_client, keys, NAME, "2026-11-30", {"n:128000": 1, "cost:128000": 50, "shadowed": 4}
    )
    await add_traffic(redis_client, keys, NAME, "2026-11-28", {})
    days = ["2026-11-28", "2026-11-29", "2026-11-30", "2026-12-01"]
    assert await read_traffic(redis_client, keys, NAME, days) == {
        "n:128000": 6, "cost:128000": 1_550, "shed": 1, "shadowed": 4,
    }  # fmt: skip
    by_day = await read_traffic_days(redis_client, keys, NAME, days)
    assert set(by_day) == {"2026-11-29", "2026-11-30"}
    assert by_day["2026-11-29"] == {"n:128000": 5, "cost:128000": 1_500, "shed": 1}
    ttl = await redis_client.ttl(keys.traffic(NAME, "2026-11-29"))
    assert TRAFFIC_TTL_SECONDS - 60 < ttl <= TRAFFIC_TTL_SECONDS
    assert not await redis_client.exists(keys.traffic(NAME, "2026-11-28"))
    assert await read_traffic(redis_client, keys, NAME, []) == {}


@pytest.mark.anyio
async def test_store_has_data_by_pairs_or_traffic(redis_client: aioredis.Redis, keys: ExperimentKeys) -> None:
    assert not await has_data(redis_client, keys, NAME, ["2026-11-30"])
    await add_traffic(redis_client, keys, NAME, "2026-11-30", {"excluded": 1})
    assert await has_data(redis_client, keys, NAME, ["2026-11-30"])
    assert not await has_data(redis_client, keys, NAME, ["2026-12-01"])
    await add_pair(redis_client, keys, "other", make_pair(1, tokens=1))
    assert await has_data(redis_client, keys, "other", [])


@pytest.mark.anyio
async def test_spent_today_reads_the_experiment_tenants_daily_cost(
    redis_client: aioredis.Redis, keys: ExperimentKeys
) -> None:
    now_ms = int(time.time() * 1000)
    daily = LedgerKeys(keys.prefix).daily(f"experiment:{NAME}", day_of(now_ms))
    assert daily == f"{keys.prefix}:{{experiment:{NAME}}}:daily:{day_of(now_ms)}"
    assert await spent_today(redis_client, key_prefix=keys.prefix, name=NAME, now_ms=now_ms) == 0
    await redis_client.hset(
        daily, mapping={"cost": 1_234_567, "requests": 3, "m:gpt-5.4-mini:cost": 1_234_567}
    )
    assert await spent_today(redis_client, key_prefix=keys.prefix, name=NAME, now_ms=now_ms) == 1_234_567
