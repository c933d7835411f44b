"""The ledger's HTTP routes on a tiny app: admin-only finance routes, and tenants who see only themselves."""

from __future__ import annotations

import csv
import io
import random
from collections.abc import AsyncIterator
from decimal import Decimal

import httpx
import orjson
import pytest
import redis.asyncio as aioredis
from fastapi import FastAPI, Request, Response

from gateway.base.errors import AuthenticationFailed, GatewayError
from gateway.base.money import usd
from gateway.base.types import Tenant
from gateway.config.schema.ledger import BudgetConfig
from gateway.ledger.apply import EventApplier
from gateway.ledger.budget import Budgets
from gateway.ledger.keys import LedgerKeys
from gateway.ledger.reader import LedgerReader
from gateway.ledger.routes import admin_router, tenant_router
from tests.gateway.test_ledger_event import NOV_30_NOON, make_event

ADMIN = {"authorization": "Bearer admin-secret"}
KEYS_OF = {"key-alpha": "alpha", "key-beta": "beta"}
ALPHA_EVENTS = [make_event(n, tenant="alpha", cost_nanos=1_000_000_000 + n) for n in range(5)]
BUDGETS = {"alpha": BudgetConfig(monthly_usd=Decimal(100), daily_usd=Decimal(10))}


def as_tenant(name: str) -> dict[str, str]:
    return {"authorization": f"Bearer key-{name}"}


def build_app(reader: LedgerReader) -> FastAPI:
    async def require_admin(request: Request) -> None:
        if request.headers.get("authorization") != ADMIN["authorization"]:
            raise AuthenticationFailed("Incorrect or missing admin key.")

    async def get_tenant(request: Request) -> Tenant:
        key = request.headers.get("authorization", "").removeprefix("Bearer ")
        if key not in KEYS_OF:
            raise AuthenticationFailed("Incorrect API key provided.")
        return Tenant(name=KEYS_OF[key], key_id=key[-4:])

    async def render(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, GatewayError)
        return Response(exc.body(), status_code=exc.status_code, media_type="application/json")

    app = FastAPI()
    clock = lambda: NOV_30_NOON / 1000  # noqa: E731
    app.include_router(admin_router(require_admin=require_admin, get_reader=lambda _: reader, clock=clock))
    app.include_router(tenant_router(get_tenant=get_tenant, get_reader=lambda _: reader, clock=clock))
    app.add_exception_handler(GatewayError, render)
    return app


@pytest.fixture
async def client(redis_client: aioredis.Redis) -> AsyncIterator[httpx.AsyncClient]:
    keys = LedgerKeys(f"test-{random.getrandbits(40):x}")
    applier = EventApplier(redis_client, keys=keys, retention_months=13)
    await applier.apply(
        [
            *ALPHA_EVENTS,
            *(make_event(n + 100, tenant="beta", cost_nanos=7, tags={"team": "ads"}) for n in range(3)),
        ]
    )
    await Budgets(redis_client, budget_of=BUDGETS.get, keys=keys, clock=lambda: NOV_30_NOON / 1000).reserve(
        "alpha", "in-flight", 250_000_000
    )
    reader = LedgerReader(redis_client, keys=keys, budget_of=BUDGETS.get, page_size=2)
    transport = httpx.ASGITransport(app=build_app(reader))
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as http:
        yield http


@pytest.mark.anyio
async def test_usage_shows_the_callers_own_spend_and_budget(client: httpx.AsyncClient) -> None:
    response = await client.get("/v1/gateway/usage", headers=as_tenant("alpha"))
    assert response.status_code == 200
    body = response.json()
    assert body["tenant"] == "alpha"
    saving = sum(e.saving_nanos for e in ALPHA_EVENTS)
    assert body["day"] == {
        "period": "2026-11-30", "requests": 5, "cost_usd": "5.000000010", "saving_usd": usd(saving),
        "counterfactual_usd": usd(5_000_000_010 + saving),
        "budget_usd": "10.000000000", "remaining_usd": "4.749999990",
    }  # fmt: skip
    assert body["month"]["budget_usd"] == "100.000000000"
    assert body["reserved_usd"] == "0.250000000"
    assert body["budget_enforced"] is True


@pytest.mark.anyio
@pytest.mark.parametrize("query", ["", "?tenant=alpha"])
async def test_usage_never_shows_another_tenant(client: httpx.AsyncClient, query: str) -> None:
    body = (await client.get(f"/v1/gateway/usage{query}", headers=as_tenant("beta"))).json()
    assert body["tenant"] == "beta"
    assert (body["day"]["cost_usd"], body["day"]["requests"]) == ("0.000000021", 3)
    assert body["day"]["budget_usd"] is None and body["reserved_usd"] == "0.000000000"
    assert b"alpha" not in orjson.dumps(body)


@pytest.mark.anyio
@pytest.mark.parametrize(
    "path",
    ["/admin/costs", "/admin/costs?tenant=beta", "/admin/costs/summary", "/admin/costs/summary?tenant=beta"],
)
@pytest.mark.parametrize(
    "headers", [{}, as_tenant("alpha"), as_tenant("beta"), {"authorization": "Bearer nope"}]
)
async def test_finance_routes_refuse_everyone_but_admin(
    client: httpx.AsyncClient, path: str, headers: dict[str, str]
) -> None:
    response = await client.get(path, headers=headers)
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "invalid_api_key"
    assert b"cost_usd" not in response.content


@pytest.mark.anyio
async def test_usage_refuses_unknown_keys(client: httpx.AsyncClient) -> None:
    assert (await client.get("/v1/gateway/usage", headers=ADMIN)).status_code == 401
    assert (await client.get("/v1/gateway/usage")).status_code == 401


@pytest.mark.anyio
async def test_admin_export_csv_for_one_tenant(client: httpx.AsyncClient) -> None:
    response = await client.get("/admin/costs?tenant=alpha&from=2026-11-30&to=2026-11-30", headers=ADMIN)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/csv")
    assert 'filename="costs-alpha-2026-11-30-2026-11-30.csv"' in response.headers["content-disposition"]
    rows = list(csv.DictReader(io.StringIO(response.text)))
    assert [row["id"] for row in rows] == [f"req-{n}" for n in range(5)]
    assert {row["tenant"] for row in rows} == {"alpha"}
    assert sum(Decimal(row["cost_usd"]) for row in rows) == Decimal("5.000000010")


@pytest.mark.anyio
@pytest.mark.parametrize("fmt", ["json", "ndjson"])
async def test_admin_export_json_formats_for_all_tenants(client: httpx.AsyncClient, fmt: str) -> None:
    response = await client.get(f"/admin/costs?format={fmt}&from=2026-11-01&to=2026-11-30", headers=ADMIN)
    assert response.status_code == 200
    text = response.text
    rows = orjson.loads(text) if fmt == "json" else [orjson.loads(line) for line in text.splitlines()]
    assert [row["tenant"] for row in rows] == ["alpha"] * 5 + ["beta"] * 3  # time order across tenants
    assert all(isinstance(row["cost_usd"], str) for row in rows)


@pytest.mark.anyio
async def test_admin_summary_by_tenant(client: httpx.AsyncClient) -> None:
    response = await client.get(
        "/admin/costs/summary?from=2026-11-01&to=2026-11-30&group_by=tenant", headers=ADMIN
    )
    body = response.json()
    assert [(row["tenant"], row["cost_usd"], row["requests"]) for row in body["data"]] == [
        ("alpha", "5.000000010", 5),
        ("beta", "0.000000021", 3),
    ]
    assert body["total"]["cost_usd"] == "5.000000031"
    csv_text = (await client.get("/admin/costs/summary?group_by=model&format=csv", headers=ADMIN)).text
    assert csv_text.splitlines()[0].startswith("model,requests,cost_usd")


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("query", "param"),
    [("format=xml", "format"), ("from=yesterday", "from"), ("from=2026-11-30&to=2026-11-01", "from")],
)
async def test_admin_export_rejects_bad_parameters(client: httpx.AsyncClient, query: str, param: str) -> None:
    response = await client.get(f"/admin/costs?{query}", headers=ADMIN)
    assert response.status_code == 400
    assert response.json()["error"]["param"] == param


@pytest.mark.anyio
async def test_admin_summary_by_tag_reads_the_events(client: httpx.AsyncClient) -> None:
    response = await client.get(
        "/admin/costs/summary?from=2026-11-01&to=2026-11-30&group_by=tag:team", headers=ADMIN
    )
    body = response.json()
    assert [(row["tag:team"], row["cost_usd"], row["requests"]) for row in body["data"]] == [
        ("", "5.000000010", 5),
        ("ads", "0.000000021", 3),
    ]
    assert body["basis"] == "events scanned from 2026-11-01T00:00:00Z to 2026-12-01T00:00:00Z"


@pytest.mark.anyio
@pytest.mark.parametrize("grouping", ["weekday", "tag:", "tag:a/b"])
async def test_admin_summary_rejects_unknown_grouping(client: httpx.AsyncClient, grouping: str) -> None:
    response = await client.get(f"/admin/costs/summary?group_by={grouping}", headers=ADMIN)
    assert (response.status_code, response.json()["error"]["param"]) == (400, "group_by")


@pytest.mark.anyio
async def test_admin_export_defaults_to_this_month_until_now(client: httpx.AsyncClient) -> None:
    response = await client.get("/admin/costs?tenant=alpha&format=ndjson", headers=ADMIN)
    times = [orjson.loads(line)["time"] for line in response.text.splitlines()]
    assert times == ["2026-11-30T12:00:00.000Z"]  # the clock reads 12:00:00.000; later events are not yet


@pytest.mark.anyio
async def test_usage_history_is_the_callers_own_spend_by_day_model_or_tag(client: httpx.AsyncClient) -> None:
    history = "/v1/gateway/usage/history?from=2026-11-01&to=2026-11-30"
    by_day = (await client.get(history, headers=as_tenant("alpha"))).json()
    assert (by_day["object"], by_day["tenant"]) == ("gateway.usage_history", "alpha")
    assert by_day["group_by"] == "day"
    days = {event.time_ms // 86_400_000 for event in ALPHA_EVENTS}
    assert len(by_day["data"]) == len(days)
    assert sum(row["requests"] for row in by_day["data"]) == by_day["total"]["requests"] == 5
    assert by_day["total"]["cost_usd"] == "5.000000010"
    by_model = (await client.get(f"{history}&group_by=model", headers=as_tenant("alpha"))).json()
    assert by_model["total"] == by_day["total"]
    by_tag = (await client.get(f"{history}&group_by=tag:team", headers=as_tenant("beta"))).json()
    assert [(row["tag:team"], row["requests"]) for row in by_tag["data"]] == [("ads", 3)]
    assert b"alpha" not in orjson.dumps(by_tag)
    so_far = (await client.get("/v1/gateway/usage/history", headers=as_tenant("alpha"))).json()
    assert (so_far["from"], so_far["to"]) == ("2026-11-01T00:00:00.000Z", "2026-11-30T12:00:00.001Z")


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("query", "param"),
    [("group_by=tenant", "group_by"), ("group_by=week", "group_by"), ("from=soon", "from")],
)
async def test_usage_history_refuses_what_it_cannot_answer(
    client: httpx.AsyncClient, query: str, param: str
) -> None:
    response = await client.get(f"/v1/gateway/usage/history?{query}", headers=as_tenant("alpha"))
    assert (response.status_code, response.json()["error"]["param"]) == (400, param)
    assert (await client.get("/v1/gateway/usage/history", headers=ADMIN)).status_code == 401
