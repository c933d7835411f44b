"""When every attempt fails, the answer and the log line say why each failed and how many were made."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
import respx
from starlette.testclient import TestClient
from structlog.testing import capture_logs

from gateway.config.schema.root import ProviderConfig
from gateway.config.settings import Settings
from gateway.edge.app import create_app
from gateway.upstream.clients import default_client
from gateway.upstream.failures import AttemptFailure, describe, summarise
from tests.factories import (
    TENANT_KEY,
    UPSTREAM,
    chat_body,
    gateway_client,
    make_config,
    shared_counter,
    write_config,
)
from tests.ports import free_port


async def failure_of(transport: str, base_url: str) -> BaseException:
    client = default_client(ProviderConfig(base_url=base_url), transport=transport)
    try:
        await client.post(f"{base_url}/chat/completions", content=b"{}")
    except httpx.TransportError as exc:
        return exc
    finally:
        await client.aclose()
    raise AssertionError("the call was expected to fail")


@pytest.mark.anyio
@pytest.mark.parametrize("transport", ["aiohttp", "httpx"])
async def test_a_refused_connection_is_named_as_such_by_both_transports(transport: str) -> None:
    # aiohttp's adapter raises ConnectTimeout for a refused connection: the cause is read from the chain
    exc = await failure_of(transport, f"http://127.0.0.1:{free_port()}/v1")
    assert describe(exc) == "connection refused"


@pytest.mark.anyio
@pytest.mark.parametrize("transport", ["aiohttp", "httpx"])
async def test_a_name_that_does_not_resolve_is_a_dns_failure(transport: str) -> None:
    exc = await failure_of(transport, "http://no-such-host.invalid/v1")
    assert describe(exc) == "DNS lookup failed"


def test_timeouts_and_closed_connections_are_told_apart() -> None:
    assert describe(httpx.ReadTimeout("slow")) == "read timeout (no answer in time)"
    assert describe(httpx.ConnectTimeout("slow")) == "connect timeout"
    assert describe(httpx.RemoteProtocolError("gone")) == "the upstream closed the connection"


def test_repeated_failures_are_folded() -> None:
    refused = AttemptFailure("gpt-5.4", "mock", "connection refused")
    busy = AttemptFailure("gpt-5.2", "mock", "status 503")
    assert summarise([refused, refused, refused, busy]) == (
        "gpt-5.4 via mock: connection refused (3 times); gpt-5.2 via mock: status 503"
    )


def test_exhausted_answer_and_log_line_carry_each_cause_and_the_attempts(
    tmp_path: Path, redis_url: str
) -> None:
    # real connections: the main model's provider refuses, its fallback's host does not resolve
    config = make_config()
    retry = config["providers"]["mock"]["retry"]
    config["providers"] |= {
        "refusing": {"base_url": f"http://127.0.0.1:{free_port()}/v1", "retry": retry},
        "unknown": {"base_url": "http://no-such-host.invalid/v1", "retry": retry},
    }
    config["models"]["gpt-5.4"]["provider"] = "refusing"
    config["models"]["gpt-5.2"]["provider"] = "unknown"
    settings = Settings(
        config=write_config(tmp_path / "gateway.yaml", config),
        redis_url=redis_url,
        data_dir=tmp_path / "data",
    )
    app = create_app(settings, counter=shared_counter())
    headers = {"authorization": f"Bearer {TENANT_KEY}"}
    with TestClient(app, headers=headers) as client, capture_logs() as logs:
        response = client.post("/v1/chat/completions", json=chat_body())
    assert response.status_code == 502
    message = response.json()["error"]["message"]
    assert message == (
        "The upstream did not answer successfully after 6 attempts: "
        "gpt-5.4 via refusing: connection refused (3 times); "
        "gpt-5.2 via unknown: DNS lookup failed (3 times)."
    )
    (line,) = [entry for entry in logs if entry["event"] == "request"]
    assert line["error"] == "upstream_unavailable"
    assert line["attempts"] == 6 and line["retries"] == 5
    assert line["error_detail"] == message


def test_a_passed_through_upstream_error_still_counts_its_attempts(tmp_path: Path, redis_url: str) -> None:
    router = respx.Router(assert_all_called=False)
    router.post(f"{UPSTREAM}/chat/completions").mock(
        return_value=httpx.Response(503, json={"error": {"message": "overloaded"}})
    )
    with gateway_client(tmp_path, redis_url, router) as client, capture_logs() as logs:
        response = client.post("/v1/chat/completions", json=chat_body(model="gpt-5.2"))
    assert response.status_code == 503
    (line,) = [entry for entry in logs if entry["event"] == "request"]
    assert line["attempts"] == 3 and line["retries"] == 2
    assert line["error_detail"].endswith("gpt-5.2 via mock: status 503 (3 times).")
