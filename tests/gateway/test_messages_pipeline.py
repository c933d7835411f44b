"""``POST /v1/messages`` through the app, the Anthropic upstream mocked by respx: forwarding byte for byte,
the key and the headers that go upstream, streams relayed, usage Anthropic's way in the ledger, budgets
held by ``max_tokens``, errors in Anthropic's shape, counts confirmed near a line, and the thinking
blocks a fallback cannot verify left out."""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import respx
from starlette.testclient import TestClient

from gateway.base.money import usd
from gateway.fronts.messages.counting import count_prompt
from tests.factories import ADMIN_KEY, TENANT_KEY, gateway_client, make_config, shared_counter
from tests.mock.anthropic import THINKING, Refused, check, error, message, message_events, signature_for, sse

CLAUDE = "https://api.anthropic.test/v1"
ANTHROPIC_HEADERS = {"authorization": "", "x-api-key": TENANT_KEY, "anthropic-version": "2023-06-01"}
USAGE = {
    "input_tokens": 20,
    "cache_creation_input_tokens": 3000,
    "cache_read_input_tokens": 10000,
    "cache_creation": {"ephemeral_5m_input_tokens": 1000, "ephemeral_1h_input_tokens": 2000},
}


def nanos(event: dict[str, Any]) -> int:
    """An exported event's cost, in nano-dollars."""
    return int(Decimal(event["cost_usd"]) * 10**9)


def config(tenant: str, **provider: Any) -> dict[str, Any]:
    base = make_config(tenants={tenant: {"keys": [TENANT_KEY]}})
    base["providers"]["claude"] = {
        "base_url": CLAUDE,
        "api_key": "sk-ant-provider",
        "kind": "anthropic",
        "retry": {"attempts": 2, "backoff_initial": 0.001, "backoff_max": 0.01, "retry_after_cap": 0.05},
        "prompt_cache": {"write_multiplier": "1.25", "granularity": 1},
        **provider,
    }
    base["models"]["claude-sonnet-4-5"] = {
        "provider": "claude",
        "context_window": 1_000_000,
        "max_output_tokens": 64_000,
        "fallbacks": ["claude-haiku-4-5"],
        "pricing": {"input": "3.00", "cached_input": "0.30", "output": "15.00"},
    }
    base["models"]["claude-haiku-4-5"] = {
        "provider": "claude",
        "context_window": 200_000,
        "pricing": {"input": "1.00", "cached_input": "0.10", "output": "5.00"},
    }
    return base


def create_body(**extra: Any) -> dict[str, Any]:
    return {
        "model": "claude-sonnet-4-5",
        "max_tokens": 512,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "Hello there"}]}],
        **extra,
    }


class Upstream:
    """Answers ``/messages`` like the mock (usage overridable), remembers what it received."""

    def __init__(self, usage: dict[str, Any] | None = None) -> None:
        self.usage = usage or USAGE
        self.calls = 0

    def messages(self, request: httpx.Request) -> httpx.Response:
        self.calls += 1
        body = orjson.loads(request.content)
        try:
            check(body)  # as the API would: tool pairs whole, signatures this model's
        except Refused as exc:
            refused = error(exc.status, exc.message)
            return httpx.Response(
                exc.status, content=refused.body, headers={"content-type": "application/json"}
            )
        reply = message(body, self.calls, self.usage)
        headers = {"request-id": "req_upstream_1", "anthropic-ratelimit-requests-remaining": "41"}
        if not body.get("stream"):
            return httpx.Response(200, json=reply, headers=headers)
        payload = sse(message_events(reply))

        async def pieces() -> AsyncIterator[bytes]:
            for start in range(0, len(payload), 61):
                yield payload[start : start + 61]

        return httpx.Response(200, content=pieces(), headers={**headers, "content-type": "text/event-stream"})


@pytest.fixture
def tenant() -> str:
    return f"claude-{uuid.uuid4().hex[:10]}"  # the Redis is shared: a tenant per test


@contextmanager
def app(
    tmp_path: Path, redis_url: str, upstream: Upstream | None, settings: dict[str, Any]
) -> Iterator[tuple[TestClient, respx.Router]]:
    router = respx.Router(assert_all_called=False)
    if upstream is not None:
        router.post(f"{CLAUDE}/messages").mock(side_effect=upstream.messages)
    with gateway_client(tmp_path, redis_url, router, config=settings) as client:
        yield client, router


def events(
    client: TestClient, tenant: str, count: int = 1, *, until: str | None = None
) -> list[dict[str, Any]]:
    """The tenant's cost events, once there are ``count`` (or one has the id ``until``): the ledger writes
    in the background."""
    deadline = time.monotonic() + 10
    while True:
        answer = client.get(
            "/admin/costs",
            params={"tenant": tenant, "format": "ndjson"},
            headers={"authorization": f"Bearer {ADMIN_KEY}"},
        )
        found = [orjson.loads(line) for line in answer.text.splitlines() if line.strip()]
        done = any(e["id"] == until for e in found) if until is not None else len(found) >= count
        if done or time.monotonic() > deadline:
            return found
        time.sleep(0.05)
        time.sleep(0.05)


def test_messages_forwards_the_bytes_with_the_providers_key_and_the_clients_anthropic_headers(
    tmp_path: Path, redis_url: str, tenant: str
) -> None:
    upstream = Upstream()
    raw = orjson.dumps(create_body(metadata={"user_id": "u1"})).replace(b",", b", ")
    betas = "context-1m-2025-08-07,interleaved-thinking-2025-05-14"
    with app(tmp_path, redis_url, upstream, config(tenant)) as (client, router):
        response = client.post(
            "/v1/messages?beta=true",
            content=raw,
            headers={**ANTHROPIC_HEADERS, "anthropic-beta": betas, "content-type": "application/json"},
        )
        sent = router.calls.last.request
        found = events(client, tenant, 1)
    assert response.status_code == 200
    assert response.json()["content"] == [{"type": "text", "text": "echo: Hello there"}]
    assert sent.content == raw  # unchanged: byte for byte
    assert sent.url.query == b"beta=true"
    assert sent.headers["x-api-key"] == "sk-ant-provider" and "authorization" not in sent.headers
    assert sent.headers["anthropic-version"] == "2023-06-01" and sent.headers["anthropic-beta"] == betas
    assert TENANT_KEY not in str(sent.headers)
    headers = response.headers
    assert headers["x-gateway-action"] == "forward" and headers["x-gateway-model"] == "claude-sonnet-4-5"
    assert headers["x-gateway-prompt-tokens-approximate"] == "true"
    assert (
        int(headers["x-gateway-prompt-tokens"])
        == count_prompt(shared_counter(), "claude-sonnet-4-5", orjson.loads(raw)).total
    )
    assert (
        headers["x-upstream-request-id"] == "req_upstream_1"
        and headers["request-id"] == headers["x-gateway-request-id"]
    )
    assert headers["anthropic-ratelimit-requests-remaining"] == "41"
    (event,) = found
    assert event["input_tokens"] == 20 + 3000 + 10000  # Anthropic's input excludes reads and writes
    assert event["cached_tokens"] == 10000 and event["cache_write_tokens"] == 3000
    output = response.json()["usage"]["output_tokens"]
    assert nanos(event) == 3000 * 20 + 300 * 10000 + 3750 * 1000 + 6000 * 2000 + 15000 * output


def test_messages_accepts_a_bearer_tenant_key_too(tmp_path: Path, redis_url: str, tenant: str) -> None:
    with app(tmp_path, redis_url, Upstream(), config(tenant)) as (client, router):
        response = client.post("/v1/messages", json=create_body())
    assert response.status_code == 200
    assert router.calls.last.request.headers["x-api-key"] == "sk-ant-provider"
    assert "anthropic-version" in router.calls.last.request.headers  # named for a client that sent none


def test_messages_stream_is_relayed_with_its_cost_and_metered_on_the_last_cumulative_usage(
    tmp_path: Path, redis_url: str, tenant: str
) -> None:
    upstream = Upstream()
    with app(tmp_path, redis_url, upstream, config(tenant)) as (client, _):
        with client.stream(
            "POST", "/v1/messages", json=create_body(stream=True), headers=ANTHROPIC_HEADERS
        ) as response:
            relayed = b"".join(response.iter_raw())
        found = events(client, tenant, 1)
    (event,) = found
    sent = list(message_events(message(create_body(stream=True), 1, USAGE)))
    # as sent, but for the request's cost, told in the usage of message_delta
    cost = {
        "x_gateway_cost_usd": usd(nanos(event), trim=True),
        "x_gateway_saving_usd": "0.00",
        "x_gateway_saving_basis": "forwarded",
    }
    expected = [{**e, "usage": {**e["usage"], **cost}} if e["type"] == "message_delta" else e for e in sent]
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
    assert relayed == sse(iter(expected))
    final_output = message(create_body(stream=True), 1, USAGE)["usage"]["output_tokens"]
    assert event["output_tokens"] == final_output  # message_delta's total, not message_start's 1 added
    assert event["cached_tokens"] == 10000 and event["stream"] is True


def test_messages_stream_ending_in_an_error_event_is_billed_on_what_it_relayed(
    tmp_path: Path, redis_url: str, tenant: str
) -> None:
    reply = message(create_body(), 1, USAGE)
    reply["content"] = [{"type": "text", "text": "A long answer that the upstream gave up on half way. " * 8}]
    events_sent = [
        event for event in message_events(reply) if event["type"] not in ("message_delta", "message_stop")
    ]
    failure = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    payload = sse(iter([*events_sent, failure]))

    async def pieces() -> AsyncIterator[bytes]:
        for start in range(0, len(payload), 50):
            yield payload[start : start + 50]

    router = respx.Router(assert_all_called=False)
    router.post(f"{CLAUDE}/messages").mock(
        side_effect=lambda _: httpx.Response(
            200, content=pieces(), headers={"content-type": "text/event-stream"}
        )
    )
    with gateway_client(tmp_path, redis_url, router, config=config(tenant)) as client:
        with client.stream(
            "POST", "/v1/messages", json=create_body(stream=True), headers=ANTHROPIC_HEADERS
        ) as response:
            relayed = b"".join(response.iter_raw())
        (event,) = events(client, tenant, 1)
    assert relayed == payload
    assert event["cached_tokens"] == 10000 and event["cache_write_tokens"] == 3000  # message_start's
    text = reply["content"][0]["text"]
    assert event["output_tokens"] == shared_counter().count_text("claude-sonnet-4-5", text) > 1
    assert event["estimated"] is True


def test_messages_hold_is_sized_by_max_tokens(tmp_path: Path, redis_url: str, tenant: str) -> None:
    settings = config(tenant)
    settings["tenants"][tenant]["budget"] = {"daily_usd": "0.05"}
    upstream = Upstream()
    with app(tmp_path, redis_url, upstream, settings) as (client, _):
        small = client.post("/v1/messages", json=create_body(max_tokens=100), headers=ANTHROPIC_HEADERS)
        large = client.post("/v1/messages", json=create_body(max_tokens=64_000), headers=ANTHROPIC_HEADERS)
    assert small.status_code == 200
    assert large.status_code == 429 and upstream.calls == 1
    assert large.json()["type"] == "error" and large.json()["error"]["type"] == "rate_limit_error"
    assert large.json()["request_id"] == large.headers["x-gateway-request-id"]


@pytest.mark.parametrize(
    ("body", "headers", "status", "kind"),
    [
        (create_body(), {"authorization": "", "x-api-key": "sk-wrong"}, 401, "authentication_error"),
        (
            {"model": "claude-sonnet-4-5", "messages": [{"role": "user", "content": "hi"}]},
            {},
            400,
            "invalid_request_error",
        ),
        (create_body(model="claude-unknown"), {}, 404, "not_found_error"),
        (create_body(model="gpt-5.4"), {}, 400, "invalid_request_error"),
    ],
)
def test_messages_gateway_errors_are_anthropics_shape(
    tmp_path: Path,
    redis_url: str,
    tenant: str,
    body: dict[str, Any],
    headers: dict[str, str],
    status: int,
    kind: str,
) -> None:
    upstream = Upstream()
    with app(tmp_path, redis_url, upstream, config(tenant)) as (client, _):
        response = client.post("/v1/messages", json=body, headers=headers)
    assert response.status_code == status and upstream.calls == 0
    data = response.json()
    assert data["type"] == "error" and data["error"]["type"] == kind
    assert data["request_id"] == response.headers["x-gateway-request-id"]


def test_messages_body_that_is_not_json_is_anthropics_400(
    tmp_path: Path, redis_url: str, tenant: str
) -> None:
    with app(tmp_path, redis_url, Upstream(), config(tenant)) as (client, _):
        response = client.post(
            "/v1/messages", content=b"{not json", headers={"content-type": "application/json"}
        )
    assert response.status_code == 400
    assert response.json()["error"] == {
        "type": "invalid_request_error",
        "message": response.json()["error"]["message"],
    }
    assert response.json()["error"]["message"].startswith("invalid_json: ")


@pytest.mark.parametrize("status", [400, 529])
def test_messages_upstream_errors_pass_through(
    tmp_path: Path, redis_url: str, tenant: str, status: int
) -> None:
    body = {
        "type": "error",
        "error": {"type": "overloaded_error", "message": "Overloaded"},
        "request_id": "req_u",
    }
    router = respx.Router(assert_all_called=False)
    route = router.post(f"{CLAUDE}/messages").mock(return_value=httpx.Response(status, json=body))
    with gateway_client(tmp_path, redis_url, router, config=config(tenant)) as client:
        response = client.post("/v1/messages", json=create_body(), headers=ANTHROPIC_HEADERS)
    assert response.status_code == status and response.json() == body
    assert route.call_count == 1  # neither is retried: 529 is for the client's own retries


def test_messages_fallback_leaves_out_thinking_it_cannot_verify(
    tmp_path: Path, redis_url: str, tenant: str
) -> None:
    upstream = Upstream()
    failing = iter(
        [httpx.Response(503, json={"type": "error", "error": {"type": "api_error", "message": "x"}})] * 2
    )

    def answer(request: httpx.Request) -> httpx.Response:
        if orjson.loads(request.content)["model"] == "claude-sonnet-4-5":
            return next(failing)
        return upstream.messages(request)

    router = respx.Router(assert_all_called=False)
    route = router.post(f"{CLAUDE}/messages").mock(side_effect=answer)
    signed = {
        "type": "thinking",
        "thinking": THINKING,
        "signature": signature_for("claude-sonnet-4-5", THINKING),
    }
    history = [
        {"role": "user", "content": "First"},
        {"role": "assistant", "content": [signed, {"type": "text", "text": "First answer"}]},
        {"role": "user", "content": "Second"},
    ]
    with gateway_client(tmp_path, redis_url, router, config=config(tenant)) as client:
        response = client.post("/v1/messages", json=create_body(messages=history), headers=ANTHROPIC_HEADERS)
    assert response.status_code == 200
    assert response.headers["x-gateway-model"] == "claude-haiku-4-5"
    assert response.headers["x-gateway-thinking-dropped"] == "1"
    first, _, last = (orjson.loads(call.request.content) for call in route.calls)
    assert first["messages"][1]["content"][0] == signed  # the model asked for gets it
    assert last["model"] == "claude-haiku-4-5"
    assert last["messages"][1]["content"] == [{"type": "text", "text": "First answer"}]


def test_messages_reroute_leaves_out_thinking_and_says_so(
    tmp_path: Path, redis_url: str, tenant: str
) -> None:
    settings = config(tenant)
    settings["policies"] = {
        "rules": [
            {
                "name": "cheap-claude",
                "match": {"models": ["claude-sonnet-4-5"]},
                "actions": {"below_warning": "reroute"},
                "reroute": {"model": "claude-haiku-4-5"},
            }
        ],
        "default": {"name": "default"},
    }
    upstream = Upstream()
    signed = {
        "type": "thinking",
        "thinking": THINKING,
        "signature": signature_for("claude-sonnet-4-5", THINKING),
    }
    redacted = {"type": "redacted_thinking", "data": "opaque"}
    history = [
        {"role": "user", "content": "First"},
        {"role": "assistant", "content": [signed, redacted, {"type": "text", "text": "First answer"}]},
        {"role": "user", "content": "Second"},
    ]
    with app(tmp_path, redis_url, upstream, settings) as (client, router):
        response = client.post("/v1/messages", json=create_body(messages=history), headers=ANTHROPIC_HEADERS)
        sent = orjson.loads(router.calls.last.request.content)
    assert response.status_code == 200, response.text
    assert response.headers["x-gateway-action"] == "reroute"
    assert response.headers["x-gateway-model"] == "claude-haiku-4-5"
    assert response.headers["x-gateway-thinking-dropped"] == "2"
    assert sent["model"] == "claude-haiku-4-5"
    assert sent["messages"][1]["content"] == [{"type": "text", "text": "First answer"}]


def test_messages_fallback_in_a_tool_loop_goes_without_thinking_for_that_turn(
    tmp_path: Path, redis_url: str, tenant: str
) -> None:
    upstream = Upstream()
    router = respx.Router(assert_all_called=False)
    route = router.post(f"{CLAUDE}/messages").mock(
        side_effect=[httpx.Response(503, json={}), httpx.Response(503, json={}), upstream.messages]
    )
    signed = {
        "type": "thinking",
        "thinking": THINKING,
        "signature": signature_for("claude-sonnet-4-5", THINKING),
    }
    use = {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}
    history = [
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": [signed, use]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "18C"}]},
    ]
    body = create_body(messages=history, thinking={"type": "enabled", "budget_tokens": 1024}, max_tokens=2048)
    with gateway_client(tmp_path, redis_url, router, config=config(tenant)) as client:
        response = client.post("/v1/messages", json=body, headers=ANTHROPIC_HEADERS)
    assert response.status_code == 200, response.text
    assert response.json()["content"] == [{"type": "text", "text": "The tool said: 18C"}]
    sent = orjson.loads(route.calls.last.request.content)
    assert "thinking" not in sent and sent["messages"][1]["content"] == [use]
    assert response.headers["x-gateway-thinking-dropped"] == "1"


def test_messages_count_near_a_line_is_confirmed_by_the_provider(
    tmp_path: Path, redis_url: str, tenant: str
) -> None:
    body = create_body()
    estimate = count_prompt(shared_counter(), "claude-sonnet-4-5", body).total
    settings = config(tenant, messages_count_tokens=True)
    warning = estimate + 100
    settings["policies"] = {
        "bands": {"claude-sonnet-4-5": {"warning_tokens": warning, "cliff_tokens": warning + 5_000}},
        "default": {"name": "default", "actions": {"warning": "forward"}, "confirm_within_tokens": 200},
    }
    router = respx.Router(assert_all_called=False)
    router.post(f"{CLAUDE}/messages").mock(side_effect=Upstream().messages)
    counts = router.post(f"{CLAUDE}/messages/count_tokens").mock(
        return_value=httpx.Response(200, json={"input_tokens": warning + 50})
    )
    with gateway_client(tmp_path, redis_url, router, config=settings) as client:
        response = client.post("/v1/messages?beta=true", json=body, headers=ANTHROPIC_HEADERS)
    assert response.status_code == 200
    assert response.headers["x-gateway-confirmed-tokens"] == str(warning + 50)
    assert "warning line" in response.headers["x-gateway-warning"]  # decided on the provider's count
    sent = counts.calls.last.request
    assert orjson.loads(sent.content) == {"model": "claude-sonnet-4-5", "messages": body["messages"]}
    assert sent.url.query == b"beta=true" and sent.headers["x-api-key"] == "sk-ant-provider"


@pytest.mark.parametrize(("setting", "asked"), [("always", True), ("near_line", False)])
def test_a_provider_set_to_confirm_always_is_asked_far_from_any_line(
    tmp_path: Path, redis_url: str, tenant: str, setting: str, asked: bool
) -> None:
    settings = config(tenant, messages_count_tokens=True, confirm_messages_counts=setting)
    router = respx.Router(assert_all_called=False)
    router.post(f"{CLAUDE}/messages").mock(side_effect=Upstream().messages)
    counts = router.post(f"{CLAUDE}/messages/count_tokens").mock(
        return_value=httpx.Response(200, json={"input_tokens": 12})
    )
    with gateway_client(tmp_path, redis_url, router, config=settings) as client:
        response = client.post("/v1/messages", json=create_body(), headers=ANTHROPIC_HEADERS)
    assert response.status_code == 200
    assert counts.call_count == (1 if asked else 0)
    assert response.headers.get("x-gateway-confirmed-tokens") == ("12" if asked else None)


@pytest.mark.parametrize(
    ("offered", "answer", "expected"),
    [
        (True, httpx.Response(200, json={"input_tokens": 10_000}), 10_000),
        (True, httpx.Response(200, json={"input_tokens": 1}), None),  # never below the gateway's count
        (True, httpx.Response(500, json={}), None),
        (False, httpx.Response(200, json={"input_tokens": 10_000}), None),
    ],
)
def test_count_tokens_answers_the_providers_count_never_below_the_gateways(
    tmp_path: Path, redis_url: str, tenant: str, offered: bool, answer: httpx.Response, expected: int | None
) -> None:
    body = {
        "model": "claude-sonnet-4-5",
        "messages": [{"role": "user", "content": "How many tokens is this?"}],
    }
    estimate = count_prompt(shared_counter(), "claude-sonnet-4-5", body).total
    router = respx.Router(assert_all_called=False)
    counts = router.post(f"{CLAUDE}/messages/count_tokens").mock(return_value=answer)
    router.post(f"{CLAUDE}/messages").mock(side_effect=Upstream().messages)
    with gateway_client(
        tmp_path, redis_url, router, config=config(tenant, messages_count_tokens=offered)
    ) as client:
        response = client.post("/v1/messages/count_tokens", json=body, headers=ANTHROPIC_HEADERS)
        billed = client.post("/v1/messages", json=create_body(), headers=ANTHROPIC_HEADERS)
        found = events(client, tenant, 1)
    assert response.status_code == 200
    assert response.json() == {"input_tokens": expected or estimate}
    assert response.headers["x-gateway-prompt-tokens"] == str(estimate)
    assert counts.call_count == (1 if offered else 0)
    assert [event["id"] for event in found] == [billed.headers["x-gateway-request-id"]]  # counting is free


def test_count_tokens_errors_are_anthropics_shape(tmp_path: Path, redis_url: str, tenant: str) -> None:
    with app(tmp_path, redis_url, None, config(tenant)) as (client, _):
        response = client.post(
            "/v1/messages/count_tokens", json={"model": "claude-sonnet-4-5", "messages": []}
        )
    assert response.status_code == 400 and response.json()["error"]["type"] == "invalid_request_error"


def test_event_logging_is_answered_here_and_never_forwarded(
    tmp_path: Path, redis_url: str, tenant: str
) -> None:
    with app(tmp_path, redis_url, Upstream(), config(tenant)) as (client, router):
        response = client.post("/api/event_logging/batch", json={"events": [{"event_type": "tengu_start"}]})
    assert response.status_code == 204 and response.content == b""
    assert router.calls.call_count == 0


def test_models_in_anthropics_format_for_anthropic_clients(
    tmp_path: Path, redis_url: str, tenant: str
) -> None:
    with app(tmp_path, redis_url, None, config(tenant)) as (client, _):
        listed = client.get("/v1/models", headers=ANTHROPIC_HEADERS).json()
        second = client.get("/v1/models?limit=1&after_id=claude-sonnet-4-5", headers=ANTHROPIC_HEADERS).json()
        before = client.get("/v1/models?before_id=claude-haiku-4-5", headers=ANTHROPIC_HEADERS).json()
        one = client.get("/v1/models/claude-haiku-4-5", headers=ANTHROPIC_HEADERS).json()
        missing = client.get("/v1/models/gpt-5.4", headers=ANTHROPIC_HEADERS)
        unauthorised = client.get(
            "/v1/models", headers={"authorization": "", "anthropic-version": "2023-06-01"}
        )
        openai = client.get("/v1/models").json()
    assert listed == {
        "data": [
            {
                "type": "model",
                "id": "claude-sonnet-4-5",
                "display_name": "claude-sonnet-4-5",
                "created_at": "1970-01-01T00:00:00Z",
            },
            {
                "type": "model",
                "id": "claude-haiku-4-5",
                "display_name": "claude-haiku-4-5",
                "created_at": "1970-01-01T00:00:00Z",
            },
        ],
        "has_more": False,
        "first_id": "claude-sonnet-4-5",
        "last_id": "claude-haiku-4-5",
    }
    assert [model["id"] for model in second["data"]] == ["claude-haiku-4-5"] and not second["has_more"]
    assert [model["id"] for model in before["data"]] == ["claude-sonnet-4-5"]
    assert one["id"] == "claude-haiku-4-5" and one["type"] == "model"
    assert missing.status_code == 404 and missing.json()["error"]["type"] == "not_found_error"
    assert unauthorised.status_code == 401 and unauthorised.json()["error"]["type"] == "authentication_error"
    assert openai["object"] == "list" and "gpt-5.4" in [model["id"] for model in openai["data"]]
