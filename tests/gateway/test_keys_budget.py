"""A managed key's own budget against a real Redis: held in the same atomic step as its tenant's, settled
by the request's cost event (which counts the key's spend on its own), released when the request fails."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
import redis.asyncio as aioredis

from gateway.base.errors import BudgetExceeded
from gateway.config.schema.ledger import BudgetConfig, LedgerConfig
from gateway.ledger.apply import EventApplier
from gateway.ledger.budget import Budgets, KeyBudget, Reservation
from gateway.ledger.keys import LedgerKeys
from gateway.ledger.period import day_of, month_of
from tests.gateway.test_ledger_event import make_event

pytestmark = pytest.mark.anyio

KEYS = LedgerKeys()
CENT = 10_000_000  # nanos
KEY_ID = "key_0000beef"


def budgets_for(redis: aioredis.Redis, tenant_budget: dict[str, Any] | None = None) -> Budgets:
    parsed = BudgetConfig.model_validate(tenant_budget) if tenant_budget is not None else None
    return Budgets(redis, budget_of=lambda tenant: parsed, config=LedgerConfig(budget_timeout_seconds=10))


def key_budget(**budget: Any) -> KeyBudget:
    return KeyBudget(KEY_ID, BudgetConfig.model_validate(budget))


async def settle(redis: aioredis.Redis, reservation: Reservation, cost: int, key_id: str = KEY_ID) -> None:
    event = make_event(
        1,
        id=reservation.request_id,
        tenant=reservation.tenant,
        key_id=key_id,
        time_ms=_now_ms(),
        cost_nanos=cost,
    )
    await EventApplier(redis, keys=KEYS, retention_months=13).apply([event])


def _now_ms() -> int:
    return int(time.time() * 1000)


async def test_keys_budget_holds_the_key_alone_when_the_tenant_has_none(
    redis_client: aioredis.Redis, tenant_name: str
) -> None:
    budgets = budgets_for(redis_client)
    key = key_budget(daily_usd="0.05")
    first = await budgets.reserve(tenant_name, "a", 3 * CENT, key)
    assert first is not None
    with pytest.raises(BudgetExceeded) as refused:
        await budgets.reserve(tenant_name, "b", 3 * CENT, key)  # 3 held + 3 > 5
    assert "the key's daily budget of $0.05" in refused.value.message
    assert await budgets.reserve(tenant_name, "other-key", 3 * CENT) is None  # another key: no budget at all


async def test_keys_budget_settled_by_the_cost_event_which_counts_the_key_spend(
    redis_client: aioredis.Redis, tenant_name: str
) -> None:
    budgets = budgets_for(redis_client)
    key = key_budget(daily_usd="0.05")
    first = await budgets.reserve(tenant_name, "a", 3 * CENT, key)
    assert first is not None
    await settle(redis_client, first, CENT)  # it cost 1 cent in the end
    daily = await redis_client.hgetall(KEYS.daily(tenant_name, day_of(_now_ms())))
    monthly = await redis_client.hgetall(KEYS.monthly(tenant_name, month_of(_now_ms())))
    assert int(daily[f"k:{KEY_ID}:cost".encode()]) == CENT
    assert int(monthly[f"k:{KEY_ID}:cost".encode()]) == CENT
    holds = await redis_client.hgetall(KEYS.holds(tenant_name))
    assert f"k:{KEY_ID}:held".encode() not in holds and b"kr:a" not in holds
    assert await budgets.reserve(tenant_name, "b", 4 * CENT, key) is not None  # 1 spent + 4 ≤ 5
    with pytest.raises(BudgetExceeded, match="key's daily budget"):
        await budgets.reserve(tenant_name, "c", 1 * CENT, key)  # 1 spent + 4 held + 1 > 5


async def test_keys_budget_config_keys_spend_is_not_counted_per_key(
    redis_client: aioredis.Redis, tenant_name: str
) -> None:
    reservation = Reservation(tenant_name, "yaml", 0)
    await settle(redis_client, reservation, CENT, key_id="0123456789ab")
    daily = await redis_client.hgetall(KEYS.daily(tenant_name, day_of(_now_ms())))
    assert not [field for field in daily if field.startswith(b"k:")]


async def test_keys_budget_release_gives_the_key_hold_back(
    redis_client: aioredis.Redis, tenant_name: str
) -> None:
    budgets = budgets_for(redis_client)
    key = key_budget(monthly_usd="0.05")
    held = await budgets.reserve(tenant_name, "a", 5 * CENT, key)
    await budgets.release(held)
    assert await budgets.reserve(tenant_name, "b", 5 * CENT, key) is not None


async def test_keys_budget_tenant_budget_still_applies(
    redis_client: aioredis.Redis, tenant_name: str
) -> None:
    budgets = budgets_for(redis_client, {"daily_usd": "0.02"})
    key = key_budget(daily_usd="1")
    with pytest.raises(BudgetExceeded) as refused:
        await budgets.reserve(tenant_name, "a", 3 * CENT, key)
    assert "the daily budget of $0.02" in refused.value.message
    assert "key's" not in refused.value.message
    assert await redis_client.hget(KEYS.holds(tenant_name), f"k:{KEY_ID}:held") is None  # nothing held


async def test_keys_budget_concurrent_holds_never_overspend(
    redis_url: str, redis_client: aioredis.Redis, tenant_name: str
) -> None:
    """A 10-cent key budget fits 10 requests of at most 1 cent; 100 arrive at once through two replicas."""
    other = aioredis.Redis.from_url(redis_url)
    replicas = [budgets_for(client) for client in (redis_client, other)]
    key = key_budget(daily_usd="0.10")

    async def attempt(number: int) -> bool:
        try:
            await replicas[number % 2].reserve(tenant_name, f"r{number}", CENT, key)
        except BudgetExceeded:
            return False
        return True

    try:
        results = await asyncio.gather(*(attempt(number) for number in range(100)))
    finally:
        await other.aclose()
    assert sum(results) == 10


async def test_keys_budget_soft_line_warns(redis_client: aioredis.Redis, tenant_name: str) -> None:
    budgets = budgets_for(redis_client)
    key = key_budget(daily_usd="0.10", soft_ratio="0.5")
    held = await budgets.reserve(tenant_name, "a", 6 * CENT, key)
    assert held is not None and held.warning is not None and held.warning.startswith("key's daily budget")
