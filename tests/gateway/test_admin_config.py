"""Hot reload and the admin config routes: valid changes apply to new requests, invalid ones are refused
with file and line while the last good config keeps serving, and secrets never leave in the output."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import orjson
import pytest
import respx

from gateway.config.schema.root import ProviderConfig
from gateway.config.settings import Settings
from gateway.edge.app import create_app
from tests.factories import (
    ADMIN_KEY,
    TENANT_KEY,
    UPSTREAM,
    chat_body,
    completion,
    gateway_client,
    make_config,
    shared_counter,
    write_config,
)

ADMIN = {"authorization": f"Bearer {ADMIN_KEY}"}


@pytest.fixture
def router() -> respx.Router:
    router = respx.Router(assert_all_called=False)
    router.post(f"{UPSTREAM}/chat/completions").mock(return_value=httpx.Response(200, json=completion()))
    return router


def test_admin_routes_need_the_admin_key(tmp_path: Path, redis_url: str, router: respx.Router) -> None:
    with gateway_client(tmp_path, redis_url, router) as client:
        assert client.get("/admin/config").status_code == 401  # a tenant key is not the admin key
        assert client.get("/admin/config", headers={"authorization": "Bearer nope"}).status_code == 401
        assert client.get("/admin/config", headers=ADMIN).status_code == 200


def test_effective_config_is_redacted(tmp_path: Path, redis_url: str, router: respx.Router) -> None:
    config = make_config()
    config["providers"]["mock"]["headers"] = {"x-secret": "s3cr3t"}
    config["tenants"]["acme"]["keys"].append({"key": "sk-tagged-secret", "tags": {"team": "search"}})
    with gateway_client(tmp_path, redis_url, router, config=config) as client:
        body = client.get("/admin/config", headers=ADMIN).json()
    text = orjson.dumps(body).decode()
    for secret in ("sk-upstream", "s3cr3t", TENANT_KEY, "sk-tagged-secret"):
        assert secret not in text
    assert body["config"]["providers"]["mock"]["api_key"] == "***"
    plain, tagged = body["config"]["tenants"]["acme"]["keys"]
    assert plain.startswith("key id ")
    assert tagged["key"].startswith("key id ") and tagged["tags"] == {"team": "search"}
    assert body["config"]["models"]["gpt-5.4"]["pricing"]["tiers"][0]["above_input_tokens"] == 272000


def test_forced_reload_applies_and_rejects(tmp_path: Path, redis_url: str, router: respx.Router) -> None:
    with gateway_client(tmp_path, redis_url, router) as client:
        path = tmp_path / "gateway.yaml"
        config = make_config()
        config["models"]["brand-new"] = {"provider": "mock"}
        write_config(path, config)
        reloaded = client.post("/admin/config/reload", headers=ADMIN)
        assert reloaded.status_code == 200
        assert "brand-new" in reloaded.json()["models"]
        assert client.get("/v1/models/brand-new").status_code == 200
        path.write_text("providers:\n  mock: {base_url: nope}\nmodels: {}\n")
        refused = client.post("/admin/config/reload", headers=ADMIN)
        assert refused.status_code == 400
        message = refused.json()["error"]["message"]
        assert f"{path}:2: providers.mock.base_url" in message
        assert client.get("/v1/models/brand-new").status_code == 200  # the last good config serves
        assert client.get("/admin/config", headers=ADMIN).json()["reload_failures"] == 1


def test_forced_reload_refuses_a_ledger_change(tmp_path: Path, redis_url: str, router: respx.Router) -> None:
    with gateway_client(tmp_path, redis_url, router) as client:
        write_config(tmp_path / "gateway.yaml", make_config(ledger={"key_prefix": "elsewhere"}))
        refused = client.post("/admin/config/reload", headers=ADMIN)
        effective = client.get("/admin/config", headers=ADMIN).json()
    assert refused.status_code == 400
    assert refused.json()["error"]["code"] == "invalid_config"
    assert "the ledger section changes only on restart" in refused.json()["error"]["message"]
    assert effective["config"]["ledger"]["key_prefix"] == "gw"
    assert effective["reload_failures"] == 1


@pytest.mark.anyio
async def test_reload_while_requests_are_in_flight(tmp_path: Path, redis_url: str) -> None:
    """Requests in flight finish on the config they started with; new ones see the new one."""
    in_flight_count = 10
    release = asyncio.Event()
    all_arrived = asyncio.Event()
    arrived = 0

    async def slow(request: httpx.Request) -> httpx.Response:
        nonlocal arrived
        arrived += 1
        if arrived == in_flight_count:
            all_arrived.set()
        await release.wait()
        return httpx.Response(200, json=completion(model=orjson.loads(request.content)["model"]))

    router = respx.Router()
    router.post(f"{UPSTREAM}/chat/completions").mock(side_effect=slow)
    path = write_config(tmp_path / "gateway.yaml", make_config())
    settings = Settings(config=path, redis_url=redis_url, admin_key=ADMIN_KEY, data_dir=tmp_path / "data")

    def factory(provider: ProviderConfig) -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=httpx.MockTransport(router.async_handler))

    app = create_app(settings, client_factory=factory, counter=shared_counter())
    headers = {"authorization": f"Bearer {TENANT_KEY}"}
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://gw", headers=headers) as client:
            in_flight = [
                asyncio.create_task(client.post("/v1/chat/completions", json=chat_body(model="small")))
                for _ in range(in_flight_count)
            ]
            await asyncio.wait_for(all_arrived.wait(), timeout=10)  # every one is upstream, on the old config
            changed = make_config()
            changed["models"]["small"]["upstream_model"] = "renamed-upstream"
            write_config(path, changed)
            assert (
                await client.post("/admin/config/reload", headers={"authorization": f"Bearer {ADMIN_KEY}"})
            ).status_code == 200
            path.write_text("not: [valid\n")
            assert (
                await client.post("/admin/config/reload", headers={"authorization": f"Bearer {ADMIN_KEY}"})
            ).status_code == 400
            release.set()
            answers = await asyncio.gather(*in_flight)
            after = await client.post("/v1/chat/completions", json=chat_body(model="small"))
    assert all(answer.status_code == 200 for answer in answers)
    assert {answer.json()["model"] for answer in answers} == {"gpt-5.4-mini"}
    assert after.json()["model"] == "renamed-upstream"


def test_file_watch_reloads_without_a_request(tmp_path: Path, redis_url: str, router: respx.Router) -> None:
    import time

    config = make_config()
    with gateway_client(tmp_path, redis_url, router, config=config, reload_interval=0.05) as client:
        config["models"]["watched"] = {"provider": "mock"}
        write_config(tmp_path / "gateway.yaml", config)
        deadline = time.monotonic() + 5
        while client.get("/v1/models/watched").status_code != 200 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert client.get("/v1/models/watched").status_code == 200
