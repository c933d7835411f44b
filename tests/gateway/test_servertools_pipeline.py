"""Server-side tools through the app, the providers mocked by respx: web searches reported by Messages
(whole and streamed), Responses (whole, streamed, background) and chat billed per use, and told to the
caller as billed; the budget hold sized by ``max_uses``; a tenant's allowance refusing them before any
upstream call; unpriced uses counted.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import respx

from tests.factories import (
    OTHER_KEY,
    TENANT_KEY,
    UPSTREAM,
    chat_body,
    completion,
    gateway_client,
    make_config,
)
from tests.gateway.test_cost_headers import told_cost
from tests.gateway.test_messages_pipeline import ANTHROPIC_HEADERS, Upstream, app, create_body, events
from tests.gateway.test_messages_pipeline import config as claude_config
from tests.gateway.test_responses_background import BY_ID, BackgroundUpstream
from tests.mock.anthropic import message, message_events
from tests.mock.anthropic import sse as anthropic_sse
from tests.mock.responses import response_events, responses_answer, sse

SEARCH_PRICE = "0.01"  # $10 per 1,000 searches
USAGE = {"input_tokens": 1000, "output_tokens": 200}


def web_search(max_uses: int | None = None) -> dict[str, Any]:
    tool: dict[str, Any] = {"type": "web_search_20250305", "name": "web_search"}
    if max_uses is not None:
        tool["max_uses"] = max_uses
    return tool


def priced(settings: dict[str, Any], model: str, **per_use: str) -> dict[str, Any]:
    settings["models"][model]["pricing"]["per_use"] = per_use
    return settings


def claude(tenant: str) -> dict[str, Any]:
    return priced(claude_config(tenant), "claude-sonnet-4-5", web_search=SEARCH_PRICE, web_fetch="0")


def gpt(tenant: str, **tenant_config: Any) -> dict[str, Any]:
    tenants = {tenant: {"keys": [TENANT_KEY], **tenant_config}, "globex": {"keys": [OTHER_KEY]}}
    settings = make_config(tenants=tenants)
    return priced(settings, "gpt-5.4", web_search=SEARCH_PRICE, file_search="0.0025", code_interpreter="0.03")


def nanos(amount: str) -> int:
    return int(Decimal(amount) * 10**9)


def tokens_nanos(input_tokens: int, output_tokens: int) -> int:
    return input_tokens * 3_000 + output_tokens * 15_000  # claude-sonnet-4-5: $3 and $15 per million


# --- Messages -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
def test_messages_fifty_searches_are_billed_fifty_times_the_price(
    tmp_path: Path, redis_url: str, tenant_name: str, stream: bool
) -> None:
    with app(tmp_path, redis_url, Upstream(USAGE), claude(tenant_name)) as (client, _):
        body = create_body(tools=[web_search(50)], stream=stream)
        answer = client.post("/v1/messages", json=body, headers=ANTHROPIC_HEADERS)
        (event,) = events(client, tenant_name)
    assert answer.status_code == 200
    assert event["tool_uses"] == "web_search=50"
    assert event["tool_cost_usd"] == "0.500000000"
    assert nanos(event["cost_usd"]) == tokens_nanos(1000, event["output_tokens"]) + 500_000_000
    assert event["estimated"] is False
    assert told_cost(answer) == nanos(event["cost_usd"])


def test_messages_stream_cut_before_its_totals_bills_the_searches_it_relayed(
    tmp_path: Path, redis_url: str, tenant_name: str
) -> None:
    reply = message(create_body(tools=[web_search(3)]), 1, USAGE)
    cut = [event for event in message_events(reply) if event["type"] not in ("message_delta", "message_stop")]
    router = respx.Router(assert_all_called=False)
    payload = anthropic_sse(iter(cut))

    def answer(request: httpx.Request) -> httpx.Response:
        async def pieces() -> AsyncIterator[bytes]:
            yield payload

        return httpx.Response(200, content=pieces(), headers={"content-type": "text/event-stream"})

    router.post("https://api.anthropic.test/v1/messages").mock(side_effect=answer)
    with gateway_client(tmp_path, redis_url, router, config=claude(tenant_name)) as client:
        body = create_body(tools=[web_search(3)], stream=True)
        client.post("/v1/messages", json=body, headers=ANTHROPIC_HEADERS).read()
        (event,) = events(client, tenant_name)
    assert event["tool_uses"] == "web_search=3" and event["tool_cost_usd"] == "0.030000000"
    assert event["estimated"] is True


def test_messages_hold_includes_max_uses_times_the_price(
    tmp_path: Path, redis_url: str, tenant_name: str
) -> None:
    settings = claude(tenant_name)
    settings["tenants"][tenant_name]["budget"] = {"daily_usd": "0.30"}
    upstream = Upstream(USAGE)
    with app(tmp_path, redis_url, upstream, settings) as (client, _):
        few = client.post(
            "/v1/messages", json=create_body(tools=[web_search(5)], max_tokens=100), headers=ANTHROPIC_HEADERS
        )
        many = client.post(
            "/v1/messages",
            json=create_body(tools=[web_search(50)], max_tokens=100),
            headers=ANTHROPIC_HEADERS,
        )
    assert few.status_code == 200
    assert many.status_code == 429 and upstream.calls == 1  # $0.50 of searches cannot fit in $0.30
    error = many.json()
    assert error["type"] == "error" and error["error"]["type"] == "rate_limit_error"
    assert "may cost up to $0.50" in error["error"]["message"]


def test_messages_hold_without_max_uses_takes_the_configured_cap(
    tmp_path: Path, redis_url: str, tenant_name: str
) -> None:
    settings = claude(tenant_name)
    settings["tenants"][tenant_name]["budget"] = {"daily_usd": "0.30"}
    settings["limits"] = {"held_tool_uses": 40}
    upstream = Upstream(USAGE)
    with app(tmp_path, redis_url, upstream, settings) as (client, _):
        refused = client.post(
            "/v1/messages", json=create_body(tools=[web_search()], max_tokens=100), headers=ANTHROPIC_HEADERS
        )
    assert refused.status_code == 429 and upstream.calls == 0
    assert "may cost up to $0.40" in refused.json()["error"]["message"]


def test_messages_tenant_refusing_server_tools_gets_anthropics_400_before_any_call(
    tmp_path: Path, redis_url: str, tenant_name: str
) -> None:
    settings = claude(tenant_name)
    settings["tenants"][tenant_name]["server_tools"] = ["web_fetch"]
    upstream = Upstream(USAGE)
    with app(tmp_path, redis_url, upstream, settings) as (client, router):
        refused = client.post(
            "/v1/messages", json=create_body(tools=[web_search(1)]), headers=ANTHROPIC_HEADERS
        )
        plain = client.post("/v1/messages", json=create_body(), headers=ANTHROPIC_HEADERS)
    assert refused.status_code == 400 and plain.status_code == 200
    error = refused.json()
    assert error["type"] == "error" and error["error"]["type"] == "invalid_request_error"
    assert "'web_search_20250305'" in error["error"]["message"]
    assert upstream.calls == 1 and len(router.calls) == 1  # the plain one only


# --- Responses ------------------------------------------------------------------------------------------


class ResponsesUpstream:
    def __init__(self) -> None:
        self.calls = 0

    def responses(self, request: httpx.Request) -> httpx.Response:
        self.calls += 1
        body = orjson.loads(request.content)
        answer = responses_answer(body, number=self.calls, usage=(1000, 0))
        if not body.get("stream"):
            return httpx.Response(200, json=answer)
        payload = sse(response_events(answer))

        async def pieces() -> AsyncIterator[bytes]:
            for start in range(0, len(payload), 97):
                yield payload[start : start + 97]

        return httpx.Response(200, content=pieces(), headers={"content-type": "text/event-stream"})


def responses_app(tmp_path: Path, redis_url: str, settings: dict[str, Any]) -> tuple[Any, ResponsesUpstream]:
    router = respx.Router(assert_all_called=False)
    upstream = ResponsesUpstream()
    router.post(f"{UPSTREAM}/responses").mock(side_effect=upstream.responses)
    router.post(f"{UPSTREAM}/chat/completions").mock(
        side_effect=lambda request: httpx.Response(200, json=completion())
    )
    return gateway_client(tmp_path, redis_url, router, config=settings), upstream


@pytest.mark.parametrize("stream", [False, True])
def test_responses_tool_calls_are_billed_from_the_output_items(
    tmp_path: Path, redis_url: str, tenant_name: str, stream: bool
) -> None:
    tools = [{"type": "web_search"}, {"type": "file_search", "vector_store_ids": ["vs_1"]},
             {"type": "code_interpreter", "container": {"type": "auto"}}]  # fmt: skip
    body = {"model": "gpt-5.4", "input": "Find it", "tools": tools, "max_tool_calls": 4, "stream": stream}
    config = gpt(tenant_name, shared_objects=["vector_stores"])  # file_search names a vector store
    gateway, _ = responses_app(tmp_path, redis_url, config)
    with gateway as client:
        answer = client.post("/v1/responses", json=body)
        answer.read()
        assert answer.status_code == 200, answer.text
        (event,) = events(client, tenant_name)
    assert event["tool_uses"] == "code_interpreter=1;file_search=1;web_search=4"
    assert nanos(event["tool_cost_usd"]) == 30_000_000 + 2_500_000 + 4 * 10_000_000
    assert told_cost(answer) == nanos(event["cost_usd"])


def test_responses_hold_uses_max_tool_calls_and_a_tenant_can_refuse(
    tmp_path: Path, redis_url: str, tenant_name: str
) -> None:
    settings = gpt(tenant_name, budget={"daily_usd": "0.30"})
    settings["tenants"]["globex"]["server_tools"] = False
    body = {
        "model": "gpt-5.4",
        "input": "Find it",
        "tools": [{"type": "web_search_preview"}],
        "max_output_tokens": 50,
    }
    gateway, upstream = responses_app(tmp_path, redis_url, settings)
    with gateway as client:
        capped = client.post("/v1/responses", json={**body, "max_tool_calls": 2})
        held = client.post("/v1/responses", json={**body, "max_tool_calls": 40})
        other = client.post("/v1/responses", json=body, headers={"authorization": f"Bearer {OTHER_KEY}"})
    assert capped.status_code == 200
    assert held.status_code == 429 and "may cost up to $0.40" in held.json()["error"]["message"]
    assert other.status_code == 400
    error = other.json()["error"]
    assert error["code"] == "server_tool_not_allowed" and error["param"] == "tools"
    assert "'web_search_preview'" in error["message"]
    assert upstream.calls == 1


def test_a_background_response_is_billed_its_tool_calls_when_it_ends(
    tmp_path: Path, redis_url: str, tenant_name: str
) -> None:
    router = respx.Router(assert_all_called=False)
    upstream = BackgroundUpstream(polls=0)
    router.post(f"{UPSTREAM}/responses").mock(side_effect=upstream.create)
    router.route(path__regex=BY_ID).mock(side_effect=upstream.by_id)
    body = {"model": "gpt-5.4", "input": "Research", "background": True, "tools": [{"type": "web_search"}],
            "max_tool_calls": 7}  # fmt: skip
    with gateway_client(tmp_path, redis_url, router, config=gpt(tenant_name)) as client:
        created = client.post("/v1/responses", json=body)
        ended = client.get(f"/v1/responses/{created.json()['id']}")
        found = events(client, tenant_name, until=created.headers["x-request-id"])
    assert created.json()["status"] == "queued" and ended.json()["status"] == "completed"
    (event,) = [e for e in found if e["id"] == created.headers["x-request-id"]]
    assert event["tool_uses"] == "web_search=7" and event["tool_cost_usd"] == "0.070000000"


# --- chat completions -----------------------------------------------------------------------------------


def test_chat_web_search_options_bills_one_search_and_can_be_refused(
    tmp_path: Path, redis_url: str, tenant_name: str
) -> None:
    settings = gpt(tenant_name)
    settings["tenants"]["globex"]["server_tools"] = False
    router = respx.Router(assert_all_called=False)
    router.post(f"{UPSTREAM}/chat/completions").mock(return_value=httpx.Response(200, json=completion()))
    with gateway_client(tmp_path, redis_url, router, config=settings) as client:
        searched = client.post("/v1/chat/completions", json=chat_body(web_search_options={}))
        (event,) = events(client, tenant_name)
        refused = client.post(
            "/v1/chat/completions",
            json=chat_body(web_search_options={}),
            headers={"authorization": f"Bearer {OTHER_KEY}"},
        )
    assert searched.status_code == 200
    assert event["tool_uses"] == "web_search=1" and event["tool_cost_usd"] == "0.010000000"
    assert told_cost(searched) == nanos(event["cost_usd"])
    assert refused.status_code == 400 and refused.json()["error"]["param"] == "web_search_options"
    assert len(router.calls) == 1


# --- unpriced uses --------------------------------------------------------------------------------------


def test_a_use_without_a_price_is_billed_nothing_but_counted(
    tmp_path: Path, redis_url: str, tenant_name: str
) -> None:
    settings = claude_config(tenant_name)  # no per_use prices at all
    with app(tmp_path, redis_url, Upstream(USAGE), settings) as (client, _):
        client.post("/v1/messages", json=create_body(tools=[web_search(4)]), headers=ANTHROPIC_HEADERS)
        (event,) = events(client, tenant_name)
        metrics = client.get("/metrics").text
    assert event["tool_uses"] == "web_search=4" and event["tool_cost_usd"] == "0.000000000"
    line = re.search(
        r'^gateway_tool_uses_total\{kind="web_search",model="claude-sonnet-4-5",priced="false"\} (\S+)$',
        metrics,
        re.MULTILINE,
    )
    assert line is not None and float(line.group(1)) >= 4
