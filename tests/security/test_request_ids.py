"""Attack: reuse one ``x-request-id`` to collapse cost events and budget holds into one.

The gateway's own id is the only key of a request's event, hold and dedup; the client's id is kept for
correlation only. A hold is given back once, and a tenant's held total never goes below zero.
"""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import orjson
import pytest
import redis.asyncio as aioredis

from gateway.config.schema.ledger import BudgetConfig, LedgerConfig
from gateway.ledger.apply import EventApplier
from gateway.ledger.budget import Budgets
from gateway.ledger.keys import LedgerKeys
from tests.gateway.test_ledger_event import make_event
from tests.security.conftest import ADMIN_KEY, Tenants

KEYS = LedgerKeys()
PROMPT = "7 " * 50


def chat(gateway: str, role: str, request_id: str, client: httpx.Client | None = None) -> httpx.Response:
    headers = {"authorization": f"Bearer {Tenants.key(role)}", "x-request-id": request_id}
    body = {"model": "gpt-5.4", "max_tokens": 20, "messages": [{"role": "user", "content": PROMPT}]}
    return (client or httpx).post(f"{gateway}/v1/chat/completions", json=body, headers=headers, timeout=30)


def events(gateway: str, tenant: str, ids: set[str], *, timeout: float = 15.0) -> list[dict[str, Any]]:
    """The tenant's cost events, once those with ``ids`` are all stored (or the timeout passed)."""
    deadline = time.monotonic() + timeout
    while True:
        answer = httpx.get(
            f"{gateway}/admin/costs",
            params={"tenant": tenant, "format": "ndjson"},
            headers={"authorization": f"Bearer {ADMIN_KEY}"},
            timeout=10,
        )
        found = [orjson.loads(line) for line in answer.text.splitlines() if line]
        if ids <= {event["id"] for event in found} or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


@pytest.mark.e2e
def test_requests_reusing_one_client_id_each_get_their_own_event(
    security_gateway: str, tenants: Tenants
) -> None:
    answers = [chat(security_gateway, "victim", "trace-42") for _ in range(10)]
    assert all(answer.status_code == 200 for answer in answers)
    assert {answer.headers["x-request-id"] for answer in answers} == {"trace-42"}  # echoed
    own = {answer.headers["x-gateway-request-id"] for answer in answers}
    assert len(own) == 10
    mine = [event for event in events(security_gateway, tenants.name("victim"), own) if event["id"] in own]
    assert len(mine) == 10
    assert {event["client_request_id"] for event in mine} == {"trace-42"}


@pytest.mark.e2e
def test_concurrent_requests_reusing_one_id_cannot_spend_past_a_hard_budget(
    security_gateway: str, tenants: Tenants
) -> None:
    """40 requests at once with the same id against $0.001 a day: each is held on its own, so the day's
    spend stays within the budget (before the fix all 40 shared one hold and were all admitted)."""
    with httpx.Client(limits=httpx.Limits(max_connections=40)) as client, ThreadPoolExecutor(40) as pool:
        answers = list(pool.map(lambda _: chat(security_gateway, "capped", "same-id", client), range(40)))
    admitted = [answer for answer in answers if answer.status_code == 200]
    refused = [answer for answer in answers if answer.status_code == 429]
    assert len(admitted) + len(refused) == 40 and refused
    assert all(answer.json()["error"]["code"] == "budget_exceeded" for answer in refused)
    ids = {answer.headers["x-gateway-request-id"] for answer in admitted}
    stored = events(security_gateway, tenants.name("capped"), ids)
    assert {event["id"] for event in stored} == ids
    spent = sum(int(event["cost_usd"].replace(".", "")) for event in stored)  # nano-dollars
    assert spent <= 1_000_000  # $0.001


def budgets(redis: aioredis.Redis, budget: dict[str, Any]) -> Budgets:
    parsed = BudgetConfig.model_validate(budget)
    return Budgets(redis, budget_of=lambda tenant: parsed, config=LedgerConfig())


async def held(redis: aioredis.Redis, tenant: str) -> int:
    return int(await redis.hget(KEYS.holds(tenant), "total") or 0)


@pytest.mark.anyio
async def test_an_event_twice_in_one_batch_gives_its_hold_back_once(
    redis_client: aioredis.Redis, tenant_name: str
) -> None:
    budget = budgets(redis_client, {"monthly_usd": 1})
    kept = await budget.reserve(tenant_name, "req_kept", 300)
    twice = await budget.reserve(tenant_name, "req_twice", 100)
    assert kept is not None and twice is not None and await held(redis_client, tenant_name) == 400
    event = make_event(1, id="req_twice", tenant=tenant_name, time_ms=int(time.time() * 1000), cost_nanos=90)
    await EventApplier(redis_client, keys=KEYS, retention_months=13).apply([event, event])
    assert await held(redis_client, tenant_name) == 300  # req_kept's hold still counts, whole


@pytest.mark.anyio
async def test_a_hold_released_twice_and_then_settled_never_leaves_the_total_below_zero(
    redis_client: aioredis.Redis, tenant_name: str
) -> None:
    budget = budgets(redis_client, {"monthly_usd": 1})
    reservation = await budget.reserve(tenant_name, "req_once", 250)
    assert reservation is not None
    await asyncio.gather(budget.release(reservation), budget.release(reservation))
    event = make_event(1, id="req_once", tenant=tenant_name, time_ms=int(time.time() * 1000), cost_nanos=1)
    await EventApplier(redis_client, keys=KEYS, retention_months=13).apply([event])
    assert await held(redis_client, tenant_name) == 0


@pytest.mark.anyio
async def test_a_held_total_gone_negative_is_not_credit(
    redis_client: aioredis.Redis, tenant_name: str
) -> None:
    """Whatever drove the total below zero (data from an older version), it never adds to the budget."""
    await redis_client.hset(KEYS.holds(tenant_name), "total", -(10**9))
    budget = budgets(redis_client, {"monthly_usd": "0.000001"})  # 1,000 nano-dollars
    with pytest.raises(Exception, match=r"more than the \$0\.000001 left .*\$0\.00 held by requests"):
        await budget.reserve(tenant_name, "req_big", 5_000)
