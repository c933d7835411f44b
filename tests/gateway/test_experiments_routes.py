from __future__ import annotations

import threading
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, TypeVar

import httpx
import orjson
import pytest
import redis.asyncio as aioredis
import respx
from fastapi import FastAPI, Request

from gateway.base.errors import AuthenticationFailed, GatewayError
from gateway.config.loading import load_config
from gateway.config.schema.root import GatewayConfig
from gateway.edge.routes import render_gateway_error
from gateway.experiments import store
from gateway.experiments.report import reading, routes
from gateway.experiments.report.routes import admin_router
from gateway.experiments.store import ExperimentKeys, add_pair, add_traffic
from gateway.ledger.keys import LedgerKeys
from gateway.ledger.period import day_of
from tests.factories import ADMIN_KEY, gateway_client, make_config, write_config
from tests.gateway.experiment_factories import make_pair, make_side, text_agreement

ADMIN = {"x-admin-key": "sesame"}
T = TypeVar("T")
EXPERIMENTS = {
    "mini": {"mode": "shadow", "primary": ["gpt-5.4"], "candidate": "small", "sample_rate": 0.1,
             "budget_usd_per_day": 20, "match": {"min_tokens": 8000}},
    "half": {"mode": "split", "primary": "gpt-5.4", "candidate": "gpt-5.2", "sample_rate": 0.5,
             "enabled": False},
}  # fmt: skip


async def require_admin(request: Request) -> None:
    if request.headers.get("x-admin-key") != "sesame":
        raise AuthenticationFailed("Incorrect or missing admin key.")


def config_of(tmp_path: Path, prefix: str) -> GatewayConfig:
    raw = make_config(experiments=EXPERIMENTS, ledger={"key_prefix": prefix})
    return load_config(write_config(tmp_path / "gateway.yaml", raw))


@pytest.fixture
async def seeded(
    redis_client: aioredis.Redis, tenant_name: str, tmp_path: Path
) -> AsyncIterator[GatewayConfig]:
    """Under a prefix of this test's own: 40 of today's pairs of ``mini`` at 150K tokens and 5 ten days old,
    today's traffic, today's shadow spend in the ledger; and pairs of ``retired``, which no config names."""
    prefix = f"gwtest-{tenant_name}"
    keys = ExperimentKeys(prefix)
    now_ms = int(time.time() * 1000)
    old_ms = now_ms - 10 * 86_400_000
    for n in range(5):
        pair = make_pair(n, tokens=150_000, primary=make_side(), candidate=make_side("small"), time_ms=old_ms)
        await redis_client.xadd(keys.pairs("mini"), {"pair": orjson.dumps(pair)}, id=f"{old_ms + n}-0")
    for n in range(40):
        pair = make_pair(100 + n, tokens=150_000, primary=make_side(cost_nanos=5_000_000, latency_ms=500),
                         candidate=make_side("small", cost_nanos=1_000_000, latency_ms=1500),
                         agreement=text_agreement(0.5 + n / 100), time_ms=now_ms)  # fmt: skip
        await add_pair(redis_client, keys, "mini", pair)
    await add_traffic(redis_client, keys, "mini", day_of(now_ms),
                      {"n:128000": 400, "cost:128000": 2_000_000_000, "shadowed": 40, "shed": 2})  # fmt: skip
    await redis_client.hset(
        LedgerKeys(prefix).daily("experiment:mini", day_of(now_ms)), "cost", 1_500_000_000
    )
    await add_pair(redis_client, keys, "retired", make_pair(1, tokens=20_000, primary=make_side(),
                                                            candidate=make_side("x")))  # fmt: skip
    yield config_of(tmp_path, prefix)
    found = [key async for key in redis_client.scan_iter(match=f"{prefix}:*")]
    await redis_client.delete(*found)


def make_app(redis: aioredis.Redis, config: GatewayConfig) -> FastAPI:
    app = FastAPI()
    app.include_router(
        admin_router(
            require_admin=require_admin, get_redis=lambda request: redis, get_config=lambda request: config
        )
    )
    app.add_exception_handler(GatewayError, render_gateway_error)
    return app


async def get(app: FastAPI, path: str, headers: dict[str, str] | None = None) -> httpx.Response:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url="http://gw") as client:
        return await client.get(path, headers=headers if headers is not None else ADMIN)


@pytest.mark.anyio
async def test_experiments_route_lists_the_configured_with_spend_today(
    redis_client: aioredis.Redis, seeded: GatewayConfig
) -> None:
    response = await get(make_app(redis_client, seeded), "/admin/experiments")
    assert response.status_code == 200, response.text
    assert response.json() == {
        "object": "list",
        "data": [
            {"name": "half", "mode": "split", "primary": ["gpt-5.4"], "candidate": "gpt-5.2",
             "sample_rate": 0.5, "enabled": False, "budget_usd_per_day": None,
             "spent_today_usd": "0.000000000"},
            {"name": "mini", "mode": "shadow", "primary": ["gpt-5.4"], "candidate": "small",
             "sample_rate": 0.1, "enabled": True, "budget_usd_per_day": "20.00",
             "spent_today_usd": "1.500000000"},
        ],
    }  # fmt: skip


@pytest.mark.anyio
async def test_experiment_report_route_json_by_bucket_within_the_window(
    redis_client: aioredis.Redis, seeded: GatewayConfig
) -> None:
    app = make_app(redis_client, seeded)
    response = await get(app, "/admin/experiments/mini/report?since=7d")
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["object"] == "gateway.experiment_report" and body["configured"] is True
    assert body["pairs"] == 40  # the ten-day-old ones are outside the window
    labels = [item["bucket"] for item in body["buckets"]]
    assert labels == ["8K-32K", "32K-128K", "128K-250K", "250K-272K", "272K-1M"]
    long = body["buckets"][2]
    assert long["pairs"] == 40 and long["candidate"]["latency_ms"]["p50"] == 1500.0
    assert long["cost"]["matching_requests"] == 400 and long["cost"]["ratio"] == 0.2
    assert long["verdict"].startswith("128K-250K: 40 pairs: candidate p50 latency 3.0x the primary's")
    assert body["budget"]["spent_today_usd"] == "1.500000000" and body["counters"]["shed"] == 2
    assert body["buckets"][0]["verdict"] == "8K-32K: no pairs"
    older = (await get(app, "/admin/experiments/mini/report?since=30d")).json()
    assert older["pairs"] == 45


@pytest.mark.anyio
async def test_experiment_report_route_html(redis_client: aioredis.Redis, seeded: GatewayConfig) -> None:
    page = await get(make_app(redis_client, seeded), "/admin/experiments/mini/report?format=html")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert page.text.startswith("<!DOCTYPE html>") and "Experiment: mini" in page.text
    assert "128K-250K: 40 pairs: candidate p50 latency 3.0x the primary&#x27;s" in page.text


@pytest.mark.anyio
async def test_experiment_report_route_of_an_unknown_name_is_404(
    redis_client: aioredis.Redis, seeded: GatewayConfig
) -> None:
    response = await get(make_app(redis_client, seeded), "/admin/experiments/nope/report")
    assert response.status_code == 404
    assert response.json() == {"error": {
        "message": "No experiment named 'nope': none is configured and none has data.",
        "type": "invalid_request_error", "param": "name", "code": "experiment_not_found",
    }}  # fmt: skip


@pytest.mark.anyio
async def test_experiment_report_route_of_an_unconfigured_name_with_data(
    redis_client: aioredis.Redis, seeded: GatewayConfig
) -> None:
    body = (await get(make_app(redis_client, seeded), "/admin/experiments/retired/report")).json()
    assert body["configured"] is False and body["pairs"] == 1 and body["candidate"] == "x"
    assert [item["bucket"] for item in body["buckets"]] == ["8K-32K"]
    configured_without_data = (
        await get(make_app(redis_client, seeded), "/admin/experiments/half/report")
    ).json()
    assert configured_without_data["pairs"] == 0 and configured_without_data["mode"] == "split"


@pytest.mark.anyio
async def test_experiment_report_route_guards(redis_client: aioredis.Redis, seeded: GatewayConfig) -> None:
    app = make_app(redis_client, seeded)
    assert (await get(app, "/admin/experiments/mini/report", headers={})).status_code == 401
    assert (await get(app, "/admin/experiments", headers={})).status_code == 401
    bad = await get(app, "/admin/experiments/mini/report?since=yesterday")
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "since"
    fmt = await get(app, "/admin/experiments/mini/report?format=pdf")
    assert fmt.status_code == 400 and fmt.json()["error"]["param"] == "format"


@pytest.mark.anyio
async def test_experiment_report_route_decodes_builds_and_renders_off_the_event_loop(
    redis_client: aioredis.Redis, seeded: GatewayConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    ran_on: dict[str, set[int]] = {}

    def on_thread_of(name: str, work: Callable[..., T]) -> Callable[..., T]:
        def wrapped(*args: Any, **kwargs: Any) -> T:
            ran_on.setdefault(name, set()).add(threading.get_ident())
            return work(*args, **kwargs)

        return wrapped

    monkeypatch.setattr(store, "_decode_page", on_thread_of("decode", store._decode_page))
    monkeypatch.setattr(reading, "build_report", on_thread_of("build", reading.build_report))
    monkeypatch.setattr(routes, "render_html", on_thread_of("html", routes.render_html))
    monkeypatch.setattr(routes, "report_document", on_thread_of("json", routes.report_document))
    app = make_app(redis_client, seeded)
    for fmt in ("json", "html"):
        response = await get(app, f"/admin/experiments/mini/report?format={fmt}")
        assert response.status_code == 200, response.text
    assert set(ran_on) == {"decode", "build", "html", "json"}
    assert all(threading.get_ident() not in threads for threads in ran_on.values()), ran_on


def test_experiment_routes_are_mounted_in_the_gateway(tmp_path: Path, redis_url: str) -> None:
    config = make_config(experiments=EXPERIMENTS)
    with respx.mock() as router, gateway_client(tmp_path, redis_url, router, config=config) as client:
        admin = {"authorization": f"Bearer {ADMIN_KEY}"}
        listing = client.get("/admin/experiments", headers=admin)
        assert listing.status_code == 200, listing.text
        assert [item["name"] for item in listing.json()["data"]] == ["half", "mini"]
        assert client.get("/admin/experiments/mini/report", headers=admin).json()["name"] == "mini"
        assert client.get("/admin/experiments/nope/report", headers=admin).status_code == 404
        assert client.get("/admin/experiments").status_code == 401  # a tenant's key is not the admin key
