from __future__ import annotations

import threading
import time
from collections.abc import AsyncIterator, Callable
from typing import Any, TypeVar

import httpx
import pytest
import redis.asyncio as aioredis
from fastapi import FastAPI, Request

from gateway.base.errors import AuthenticationFailed, GatewayError
from gateway.config.schema.sampling import SamplingConfig
from gateway.edge.routes import render_gateway_error
from gateway.sampling.keys import SamplingKeys
from gateway.sampling.probes.needle import ProbeResult
from gateway.sampling.report import routes
from gateway.sampling.report.routes import admin_router
from gateway.sampling.signals import Signal
from tests.gateway.test_sampling_factories import planted_signals

ADMIN = {"x-admin-key": "sesame"}
T = TypeVar("T")


async def require_admin(request: Request) -> None:
    if request.headers.get("x-admin-key") != "sesame":
        raise AuthenticationFailed("Incorrect or missing admin key.")


@pytest.fixture
async def seeded(redis_client: aioredis.Redis, tenant_name: str) -> AsyncIterator[tuple[SamplingConfig, str]]:
    """Samples of ``gpt-5.4`` under a prefix of this test's own: 10 days old ones, then today's with a
    planted cliff at 250K; probe results that fail above 250K."""
    config = SamplingConfig(key_prefix=f"gwtest-{tenant_name}")
    keys = SamplingKeys(config.key_prefix)
    now_ms = int(time.time() * 1000)
    old_ms = now_ms - 10 * 86_400_000
    for n, signal in enumerate(planted_signals(cliff_at=10**9, per_bucket=5, seed=1)):
        await redis_client.xadd(keys.samples("gpt-5.4"), signal.to_fields(), id=f"{old_ms + n}-0")  # type: ignore[arg-type]
    recent = planted_signals(cliff_at=250_000, per_bucket=40, error_rate_after=0.4)
    for n, signal in enumerate(recent):
        await redis_client.xadd(keys.samples("gpt-5.4"), signal.to_fields(), id=f"{now_ms - 60_000 + n}-0")  # type: ignore[arg-type]
    for n, length in enumerate([100_000] * 4 + [260_000] * 4):
        result = ProbeResult(time=time.time(), run_id="r", request_id=f"p{n}", model="gpt-5.4", length=length,
                             depth=0.5, repeat=n, prompt_tokens=length, recalled=length < 250_000, status=200,
                             latency=1.0)  # fmt: skip
        await redis_client.xadd(keys.probes("gpt-5.4"), result.to_fields())  # type: ignore[arg-type]
    await redis_client.sadd(keys.models(), "gpt-5.4")  # type: ignore[misc]
    yield config, keys.models()
    await redis_client.delete(keys.samples("gpt-5.4"), keys.probes("gpt-5.4"), keys.models())


def make_app(redis: aioredis.Redis, config: SamplingConfig) -> FastAPI:
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
async def test_report_route_json_by_bucket_with_boundary_and_window(
    redis_client: aioredis.Redis, seeded: tuple[SamplingConfig, str]
) -> None:
    app = make_app(redis_client, seeded[0])
    response = await get(app, "/admin/probes/report?model=gpt-5.4&since=7d")
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["object"] == "gateway.behaviour_report" and body["model"] == "gpt-5.4"
    assert body["samples"] == 240  # the 10-day-old samples are outside the window
    labels = [bucket["bucket"] for bucket in body["buckets"]]
    assert labels == ["0-8K", "8K-32K", "32K-128K", "128K-250K", "250K-272K", "272K-1M"]
    first = body["buckets"][0]
    assert set(first["latency_s"]) == {"count", "p10", "p50", "p90"}
    assert first["finish_reasons"] == {"stop": 40}
    assert body["boundary"]["bucket"] == "250K-272K"
    assert "probe_recall" in body["boundary"]["signals"] and "error_rate" in body["boundary"]["signals"]
    assert body["buckets"][4]["probes"] == {"recalled": 0, "total": 4, "recall": 0.0}
    assert body["probe_recall"]["lengths"] == [100_000, 260_000]

    older = (await get(app, "/admin/probes/report?model=gpt-5.4&since=30d")).json()
    assert older["samples"] == 270


@pytest.mark.anyio
async def test_report_route_html_lists_models_and_guards(
    redis_client: aioredis.Redis, seeded: tuple[SamplingConfig, str]
) -> None:
    app = make_app(redis_client, seeded[0])
    page = await get(app, "/admin/probes/report?model=gpt-5.4&format=html")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "Effective-context boundary: 250K-272K" in page.text
    listing = await get(app, "/admin/probes/report")
    assert listing.json() == {"object": "list", "data": [{"model": "gpt-5.4"}]}
    assert (await get(app, "/admin/probes/report?model=gpt-5.4", headers={})).status_code == 401
    bad = await get(app, "/admin/probes/report?model=gpt-5.4&since=yesterday")
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "since"
    assert (await get(app, "/admin/probes/report?model=gpt-5.4&format=pdf")).status_code == 400


@pytest.mark.anyio
async def test_report_route_of_an_unknown_model_is_empty(
    redis_client: aioredis.Redis, seeded: tuple[SamplingConfig, str]
) -> None:
    body = (await get(make_app(redis_client, seeded[0]), "/admin/probes/report?model=nope")).json()
    assert body["samples"] == 0 and body["boundary"] is None
    assert all(bucket["count"] == 0 for bucket in body["buckets"])


@pytest.mark.anyio
async def test_report_route_parses_builds_and_renders_off_the_event_loop(
    redis_client: aioredis.Redis, seeded: tuple[SamplingConfig, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Up to 200K samples: parsing them, the report and its rendering must not hold the event loop."""
    ran_on: dict[str, set[int]] = {}

    def on_thread_of(name: str, work: Callable[..., T]) -> Callable[..., T]:
        def wrapped(*args: Any, **kwargs: Any) -> T:
            ran_on.setdefault(name, set()).add(threading.get_ident())
            return work(*args, **kwargs)

        return wrapped

    monkeypatch.setattr(Signal, "from_fields", on_thread_of("parse", Signal.from_fields))
    monkeypatch.setattr(routes, "build_report", on_thread_of("build", routes.build_report))
    monkeypatch.setattr(routes, "render_html", on_thread_of("html", routes.render_html))
    monkeypatch.setattr(routes, "report_document", on_thread_of("json", routes.report_document))
    app = make_app(redis_client, seeded[0])
    for fmt in ("json", "html"):
        response = await get(app, f"/admin/probes/report?model=gpt-5.4&format={fmt}")
        assert response.status_code == 200, response.text
    assert set(ran_on) == {"parse", "build", "html", "json"}
    assert all(threading.get_ident() not in threads for threads in ran_on.values()), ran_on
