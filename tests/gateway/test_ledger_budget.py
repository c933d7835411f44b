"""Budgets against a real Redis: reservations hold under concurrency, events settle them, failures release."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis

from gateway.base.errors import BudgetExceeded, ServiceUnavailable
from gateway.config.schema.ledger import BudgetConfig, LedgerConfig
from gateway.ledger.apply import EventApplier
from gateway.ledger.budget import MAX_CONCURRENT_CHECKS, Budgets, Reservation
from gateway.ledger.keys import LedgerKeys
from gateway.ledger.period import day_of, month_of
from gateway.ledger.summary import read_counters
from gateway.redis.server import EmbeddedRedis
from tests.gateway.test_ledger_event import make_event
from tests.ports import free_port

KEYS = LedgerKeys()
CENT = 10_000_000  # nanos


@asynccontextmanager
async def dropping_server() -> AsyncIterator[tuple[str, list[int]]]:
    """A Redis URL whose server accepts each connection and drops it at once; yields the URL and a list
    that grows by one per connection accepted."""
    accepted: list[int] = []

    async def drop(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(1)
        writer.close()

    server = await asyncio.start_server(drop, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"redis://127.0.0.1:{port}/0", accepted
    finally:
        server.close()
        await server.wait_closed()


def budgets_for(redis: aioredis.Redis, budget: dict[str, Any] | None, **config: Any) -> Budgets:
    parsed = BudgetConfig.model_validate(budget) if budget is not None else None
    return Budgets(redis, budget_of=lambda tenant: parsed, config=LedgerConfig(**config))


async def spent_this_month(redis: aioredis.Redis, tenant: str) -> int:
    counters = read_counters(await redis.hgetall(KEYS.monthly(tenant, month_of(int(time.time() * 1000)))))
    return counters[""].cost_nanos if "" in counters else 0


async def settle(redis: aioredis.Redis, reservation: Reservation, cost: int) -> None:
    event = make_event(
        1,
        id=reservation.request_id,
        tenant=reservation.tenant,
        time_ms=int(time.time() * 1000),
        cost_nanos=cost,
    )
    await EventApplier(redis, keys=KEYS, retention_months=13).apply([event])


@pytest.mark.anyio
async def test_budget_500_concurrent_reservations_never_overspend(
    redis_url: str, redis_client: aioredis.Redis, tenant_name: str
) -> None:
    """A $1 monthly budget fits 100 requests of at most 1 cent; 500 arrive at once through two replicas."""
    other_replica = aioredis.Redis.from_url(redis_url)
    replicas = [
        budgets_for(client, {"monthly_usd": 1}, budget_timeout_seconds=10)
        for client in (redis_client, other_replica)
    ]

    async def attempt(number: int) -> Reservation | None:
        try:
            return await replicas[number % 2].reserve(tenant_name, f"req-{number}", CENT)
        except BudgetExceeded:
            return None

    try:
        outcomes = await asyncio.gather(*(attempt(n) for n in range(500)))
        accepted = [r for r in outcomes if r is not None]
        assert len(accepted) == 100
        await asyncio.gather(*(settle(redis_client, r, CENT) for r in accepted))
        with pytest.raises(BudgetExceeded, match=r"^The monthly budget of \$1.00 is spent \(\$1.00 spent"):
            await replicas[0].reserve(tenant_name, "one-more", 1)
    finally:
        await other_replica.aclose()
    spent = await spent_this_month(redis_client, tenant_name)
    assert spent == 100 * CENT
    assert spent <= 10**9 + CENT  # at most one request's maximum above the limit
    assert await redis_client.hget(KEYS.holds(tenant_name), "total") == b"0"


@pytest.mark.anyio
async def test_budget_settles_to_actual_cost_and_frees_the_rest(
    redis_client: aioredis.Redis, tenant_name: str
) -> None:
    budgets = budgets_for(redis_client, {"daily_usd": "0.05"})
    first = await budgets.reserve(tenant_name, "a", 3 * CENT)
    assert first is not None
    with pytest.raises(BudgetExceeded, match="daily budget"):
        await budgets.reserve(tenant_name, "b", 3 * CENT)  # 3 held + 3 > 5
    await settle(redis_client, first, CENT)  # it cost 1 cent in the end
    assert await budgets.reserve(tenant_name, "b", 3 * CENT) is not None  # 1 spent + 3 held ≤ 5
    daily = read_counters(
        await redis_client.hgetall(KEYS.daily(tenant_name, day_of(int(time.time() * 1000))))
    )
    assert daily[""].cost_nanos == CENT


@pytest.mark.anyio
async def test_budget_refusing_a_hold_says_so_with_the_figures(
    redis_client: aioredis.Redis, tenant_name: str
) -> None:
    """Nothing spent yet: what was refused is the hold of a request whose cap may cost more than is left."""
    budgets = budgets_for(redis_client, {"monthly_usd": 1})
    assert await budgets.reserve(tenant_name, "in-flight", 30 * CENT) is not None
    with pytest.raises(BudgetExceeded) as refused:
        await budgets.reserve(tenant_name, "large", 200 * CENT)
    assert refused.value.message == (
        "This request may cost up to $2.00, held before it is sent: that hold was refused (nothing was "
        "spent on it), being more than the $0.70 left of the monthly budget of $1.00 ($0.00 spent, $0.30 "
        "held by requests in flight). Asking for fewer output tokens lowers it."
    )
    assert "reached" not in refused.value.message


@pytest.mark.anyio
async def test_budget_release_gives_the_hold_back(redis_client: aioredis.Redis, tenant_name: str) -> None:
    budgets = budgets_for(redis_client, {"monthly_usd": "0.01"})
    held = await budgets.reserve(tenant_name, "fails-upstream", CENT)
    with pytest.raises(BudgetExceeded):
        await budgets.reserve(tenant_name, "next", CENT)
    await budgets.release(held)
    await budgets.release(held)  # twice is harmless
    assert await budgets.reserve(tenant_name, "next", CENT) is not None


@pytest.mark.anyio
async def test_budget_reserving_the_same_request_twice_holds_once(
    redis_client: aioredis.Redis, tenant_name: str
) -> None:
    budgets = budgets_for(redis_client, {"monthly_usd": "0.02"})
    await budgets.reserve(tenant_name, "same", CENT)
    await budgets.reserve(tenant_name, "same", CENT)
    assert await redis_client.hget(KEYS.holds(tenant_name), "total") == str(CENT).encode()


@pytest.mark.anyio
async def test_budget_holds_lapse_after_their_ttl(redis_client: aioredis.Redis, tenant_name: str) -> None:
    budgets = budgets_for(redis_client, {"monthly_usd": "0.01"}, reservation_ttl_seconds=1)
    await budgets.reserve(tenant_name, "crashed-replica", CENT)
    with pytest.raises(BudgetExceeded):
        await budgets.reserve(tenant_name, "next", CENT)
    await asyncio.sleep(1.1)
    assert await budgets.reserve(tenant_name, "next", CENT) is not None


@pytest.mark.anyio
async def test_budget_none_without_a_budget(redis_client: aioredis.Redis, tenant_name: str) -> None:
    assert await budgets_for(redis_client, None).reserve(tenant_name, "r", 10**12) is None


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("budget", "already_spent", "warning"),
    [
        ({"monthly_usd": 1, "soft_ratio": 0.5}, 40 * CENT, None),
        ({"monthly_usd": 1, "soft_ratio": 0.5}, 55 * CENT, "monthly budget of $1.00 56% used"),
        ({"monthly_usd": 1, "soft_usd": "0.9"}, 89 * CENT, "monthly budget of $1.00 90% used"),
        ({"daily_usd": 1, "hard": False}, 150 * CENT, "daily budget of $1.00 exceeded"),
    ],
)
async def test_budget_soft_line_warns(
    redis_client: aioredis.Redis,
    tenant_name: str,
    budget: dict[str, Any],
    already_spent: int,
    warning: str | None,
) -> None:
    budgets = budgets_for(redis_client, budget)
    await settle(redis_client, Reservation(tenant_name, "earlier", 0), already_spent)
    reservation = await budgets.reserve(tenant_name, "now", CENT)
    assert reservation is not None
    if warning is None:
        assert reservation.warning is None
    else:
        assert reservation.warning is not None and reservation.warning.startswith(warning)


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("budget", "passes"),
    [
        ({"monthly_usd": 1}, False),
        ({"monthly_usd": 1, "on_redis_down": "open"}, True),
        ({"monthly_usd": 1, "hard": False}, True),
    ],
)
async def test_budget_redis_down_fails_as_configured(
    tenant_name: str, budget: dict[str, Any], passes: bool
) -> None:
    async with dropping_server() as (url, accepted):
        redis = aioredis.Redis.from_url(url, socket_connect_timeout=0.2)
        budgets = budgets_for(redis, budget, budget_timeout_seconds=0.5, probe_interval_seconds=30)
        try:
            for call in range(2):
                if passes:
                    reservation = await budgets.reserve(tenant_name, "r", CENT)
                    assert reservation is not None and not reservation.enforced and reservation.warning
                    await budgets.release(reservation)
                else:
                    with pytest.raises(ServiceUnavailable, match="budget cannot be checked"):
                        await budgets.reserve(tenant_name, "r", CENT)
                if call == 0:
                    assert accepted, "the first call asks Redis"
                    tried = len(accepted)
            assert len(accepted) == tried, "the second call does not ask (nor wait on) Redis again"
        finally:
            await redis.aclose()


@pytest.mark.anyio
async def test_budget_waiting_for_a_free_check_counts_in_the_timeout(
    redis_client: aioredis.Redis, tenant_name: str
) -> None:
    budgets = budgets_for(redis_client, {"monthly_usd": 1}, budget_timeout_seconds=0.2)
    for _ in range(MAX_CONCURRENT_CHECKS):  # every check in flight is stuck on a stalled Redis
        await budgets._in_flight.acquire()
    async with asyncio.timeout(30):  # not a speed bound: without it a wait for a free check never ends
        with pytest.raises(ServiceUnavailable, match="budget cannot be checked"):
            await budgets.reserve(tenant_name, "queued", CENT)


@pytest.mark.anyio
async def test_budget_release_never_raises_when_redis_is_gone(tmp_path: Path, tenant_name: str) -> None:
    server = EmbeddedRedis(tmp_path, port=free_port(), persist=False)
    redis = aioredis.Redis.from_url(server.start(), socket_connect_timeout=0.2)
    try:
        budgets = budgets_for(redis, {"monthly_usd": 1})
        reservation = await budgets.reserve(tenant_name, "r", CENT)
        assert reservation is not None and reservation.enforced
        server.stop()
        await budgets.release(reservation)  # logged; the hold lapses with its TTL
    finally:
        await redis.aclose()
        server.stop()
