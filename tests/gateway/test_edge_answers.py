"""Small answers of the HTTP edge a newcomer meets first: admin routes switched off say so with a code,
the model lists carry the request ids every answer carries, and ``/`` answers ``GET`` and ``HEAD``."""

from __future__ import annotations

from pathlib import Path

import pytest
import respx
from starlette.testclient import TestClient

from gateway.config.settings import Settings
from gateway.edge.app import create_app
from tests.factories import TENANT_KEY, gateway_client, make_config, shared_counter, write_config


def test_admin_routes_switched_off_answer_403_admin_disabled(tmp_path: Path, redis_url: str) -> None:
    settings = Settings(
        config=write_config(tmp_path / "gateway.yaml", make_config()),
        redis_url=redis_url,
        data_dir=tmp_path / "data",
    )
    assert settings.admin_key is None
    with TestClient(create_app(settings, counter=shared_counter())) as client:
        for path in ("/admin/config", "/admin/costs/summary", "/admin/experiments"):
            response = client.get(path)
            assert response.status_code == 403, path
            error = response.json()["error"]
            assert (error["type"], error["code"]) == ("permission_error", "admin_disabled"), path
            assert "GATEWAY_ADMIN_KEY" in error["message"]


@pytest.mark.parametrize("path", ["/v1/models", "/v1/models/gpt-5.4", "/v1/models/nope"])
@pytest.mark.parametrize("anthropic", [False, True])
def test_model_lists_carry_the_request_ids(
    tmp_path: Path, redis_url: str, path: str, anthropic: bool
) -> None:
    config = make_config()
    config["providers"]["claude"] = {"base_url": "https://api.anthropic.test/v1", "kind": "anthropic"}
    config["models"]["gpt-5.4"]["provider"] = "claude"  # listed to Anthropic clients too
    headers = {"x-request-id": "trace-7", "x-api-key": TENANT_KEY}
    if anthropic:
        headers["anthropic-version"] = "2023-06-01"
    with gateway_client(tmp_path, redis_url, respx.Router(), config=config) as client:
        response = client.get(path, headers=headers)
        own = client.get(path, headers={"x-api-key": TENANT_KEY})
    assert response.status_code == (404 if path.endswith("nope") else 200)
    gateway_id = response.headers["x-gateway-request-id"]
    assert gateway_id.startswith("req_") and response.headers["x-request-id"] == "trace-7"
    assert own.headers["x-request-id"] == own.headers["x-gateway-request-id"] != gateway_id
    if anthropic:
        assert response.headers["request-id"] == gateway_id
        if response.status_code == 404:
            assert response.json()["request_id"] == gateway_id


def test_root_answers_get_and_head(tmp_path: Path, redis_url: str) -> None:
    with gateway_client(tmp_path, redis_url, respx.Router()) as client:
        got = client.get("/", headers={"authorization": ""})
        head = client.head("/", headers={"authorization": ""})
    assert got.status_code == 200 and got.json()["status"] == "ok"
    assert head.status_code == 200 and head.content == b""
