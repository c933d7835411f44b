"""The attacks of the security suite run against a real ``gateway serve`` and the mock upstream process.

One gateway serves the whole suite. Its tenants: ``victim`` and ``attacker`` (plain), ``capped`` (a $0.001
hard budget per day), ``granted`` (the only one granted the provider's shared files). Its passthrough list
names ``/moderations`` for everyone and ``/files/**`` for ``granted`` alone.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import openai
import orjson
import pytest
from starlette.testclient import TestClient

from tests.e2e.processes import gateway_process, mock_upstream
from tests.factories import ADMIN_KEY as APP_ADMIN_KEY
from tests.factories import make_config, write_config

ADMIN_KEY = "admin-e2e"  # what tests.e2e.processes.gateway_process sets


@dataclass(frozen=True, slots=True)
class Tenants:
    """The suite's tenant names (fresh per run, so a shared Redis holds no earlier run's spend) and keys."""

    suffix: str

    def name(self, role: str) -> str:
        return f"{role}-{self.suffix}"

    @staticmethod
    def key(role: str) -> str:
        return f"sk-security-{role}"


ROLES = ("victim", "attacker", "capped", "granted")


def security_config(tenants: Tenants, mock_url: str) -> dict[str, Any]:
    config = make_config(
        tenants={
            tenants.name(role): {"keys": [tenants.key(role)]}
            | ({"budget": {"daily_usd": "0.001", "hard": True}} if role == "capped" else {})
            for role in ROLES
        },
        passthrough=[
            {"path": "/moderations"},
            {
                "path": "/files/**",
                "methods": ["GET", "POST", "DELETE"],
                "provider": "mock",
                "tenants": [tenants.name("granted")],
            },
        ],
    )
    config["providers"]["mock"]["base_url"] = f"{mock_url}/v1"
    config["providers"]["mock"]["organization"] = "org-configured"
    return config


@pytest.fixture(scope="session")
def security_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("security")


@pytest.fixture(scope="session")
def tenants() -> Tenants:
    return Tenants(uuid.uuid4().hex[:8])


@pytest.fixture(scope="session")
def security_mock_url(security_dir: Path) -> Iterator[str]:
    with mock_upstream(security_dir) as url:
        yield url


@pytest.fixture(scope="session")
def security_gateway(
    security_dir: Path, security_mock_url: str, redis_url: str, tenants: Tenants
) -> Iterator[str]:
    path = write_config(security_dir / "gateway.yaml", security_config(tenants, security_mock_url))
    with gateway_process(path, redis_url, security_dir) as url:
        yield url


@pytest.fixture
def upstream(security_mock_url: str) -> Iterator[httpx.Client]:
    """The mock upstream, reset before and after the test: ``seen(upstream)`` is what reached it."""
    with httpx.Client(base_url=security_mock_url) as client:
        client.post("/_reset")
        yield client
        client.post("/_reset")


def seen(upstream: httpx.Client) -> list[dict[str, Any]]:
    requests: list[dict[str, Any]] = upstream.get("/_requests").json()["requests"]
    return requests


def sdk(gateway: str, role: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{gateway}/v1", api_key=Tenants.key(role), max_retries=0)


def app_events(client: TestClient, tenant: str, *, until: str, timeout: float = 10.0) -> list[dict[str, Any]]:
    """The tenant's cost events in an app under test (``tests.factories.gateway_client``), once the one with
    id ``until`` is stored."""
    deadline = time.monotonic() + timeout
    while True:
        answer = client.get(
            f"/admin/costs?tenant={tenant}&format=ndjson",
            headers={"authorization": f"Bearer {APP_ADMIN_KEY}"},
        )
        found = [orjson.loads(line) for line in answer.text.splitlines() if line]
        if any(event["id"] == until for event in found):
            return found
        assert time.monotonic() < deadline, f"no cost event {until}"
        time.sleep(0.02)
