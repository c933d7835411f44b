"""A provider's 401 is its answer to the gateway's key, not to the client's: each front answers a 502 in
its own error shape that says so, leaves the provider's body (which may quote the key) out, and the log
says why."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
import respx
from structlog.testing import capture_logs

from tests.factories import TENANT_KEY, UPSTREAM, chat_body, gateway_client, make_config

CLAUDE = "https://api.anthropic.test/v1"
OPENAI_401 = {
    "error": {
        "message": "Incorrect API key provided: sk-upst****ream.",
        "type": "invalid_request_error",
        "param": None,
        "code": "invalid_api_key",
    }
}
ANTHROPIC_401 = {"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}}


def with_claude(config: dict[str, Any]) -> dict[str, Any]:
    config["providers"]["claude"] = {"base_url": CLAUDE, "api_key": "sk-ant-provider", "kind": "anthropic"}
    config["models"]["claude-sonnet-4-5"] = {"provider": "claude", "context_window": 200_000}
    return config


FRONTS = [
    ("/v1/chat/completions", chat_body(), f"{UPSTREAM}/chat/completions", OPENAI_401, "invalid_api_key"),
    (
        "/v1/responses",
        {"model": "gpt-5.4", "input": "hi"},
        f"{UPSTREAM}/responses",
        OPENAI_401,
        "invalid_api_key",
    ),
    (
        "/v1/messages",
        {"model": "claude-sonnet-4-5", "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]},
        f"{CLAUDE}/messages",
        ANTHROPIC_401,
        "authentication_error",
    ),
]


def error_of(path: str, body: dict[str, Any]) -> tuple[str, str]:
    """(type, message) of an error body in the front's own shape."""
    if path == "/v1/messages":
        assert body["type"] == "error" and set(body["error"]) == {"type", "message"}
        return body["error"]["type"], body["error"]["message"]
    assert set(body["error"]) == {"message", "type", "param", "code"}
    assert body["error"]["code"] == "provider_key_refused"
    return body["error"]["type"], body["error"]["message"]


@pytest.mark.parametrize(("path", "request_body", "upstream", "answer", "upstream_code"), FRONTS)
def test_a_refused_provider_key_is_a_502_that_names_the_gateways_key(
    tmp_path: Path,
    redis_url: str,
    path: str,
    request_body: dict[str, Any],
    upstream: str,
    answer: dict[str, Any],
    upstream_code: str,
) -> None:
    router = respx.Router(assert_all_called=False)
    route = router.post(upstream).mock(return_value=httpx.Response(401, json=answer))
    headers = {"x-api-key": TENANT_KEY, "anthropic-version": "2023-06-01"} if path == "/v1/messages" else {}
    with (
        gateway_client(tmp_path, redis_url, router, config=with_claude(make_config())) as client,
        capture_logs() as logs,
    ):
        response = client.post(path, json=request_body, headers=headers)
    assert response.status_code == 502
    kind, message = error_of(path, response.json())
    assert kind == ("api_error" if path == "/v1/messages" else "upstream_error")
    provider = "claude" if path == "/v1/messages" else "mock"
    assert f"The provider {provider!r} refused the gateway's API key for it (401 {upstream_code})" in message
    assert "Your own key was accepted" in message and f"providers.{provider}.api_key" in message
    assert "sk-" not in response.text  # the provider's body, quoting part of the key, stays out
    assert route.call_count == 1  # not retried: it would fail the same way
    (refused,) = [entry for entry in logs if entry["event"] == "provider_key_refused"]
    assert (refused["provider"], refused["upstream_code"], refused["key_configured"]) == (
        provider,
        upstream_code,
        True,
    )
    (line,) = [entry for entry in logs if entry["event"] == "request"]
    assert (line["status"], line["error"]) == (502, "provider_key_refused")
    assert "refused the gateway's API key" in line["error_detail"]


def test_a_provider_without_a_key_is_named_as_such(tmp_path: Path, redis_url: str) -> None:
    config = make_config()
    del config["providers"]["mock"]["api_key"]
    router = respx.Router(assert_all_called=False)
    router.post(f"{UPSTREAM}/chat/completions").mock(return_value=httpx.Response(401, json=OPENAI_401))
    with gateway_client(tmp_path, redis_url, router, config=config) as client, capture_logs() as logs:
        response = client.post("/v1/chat/completions", json=chat_body())
    assert response.status_code == 502
    assert "the gateway has no API key configured for it" in response.json()["error"]["message"]
    (refused,) = [entry for entry in logs if entry["event"] == "provider_key_refused"]
    assert refused["key_configured"] is False
