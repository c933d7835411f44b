"""Server-side tools through a real gateway process to the mock providers, with the official SDKs: web
searches reported by Messages and Responses (streamed and not) billed per use in the ledger, a budget
refusing a request whose ``max_uses`` could cross it, and a tenant whose allowance refuses the tools."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import orjson
import pytest

from tests.e2e.processes import gateway_process
from tests.factories import make_config, write_config

pytestmark = pytest.mark.e2e

ADMIN = {"authorization": "Bearer admin-e2e"}  # processes.gateway_process sets GATEWAY_ADMIN_KEY
FAST_RETRY = {"attempts": 2, "backoff_initial": 0.001, "backoff_max": 0.01, "retry_after_cap": 0.05}
SEARCH = "0.01"  # $10 per 1,000 searches


@dataclass(frozen=True, slots=True)
class Gateway:
    url: str
    keys: dict[str, str]
    tenants: dict[str, str]

    def claude(self, who: str = "main") -> anthropic.Anthropic:
        return anthropic.Anthropic(base_url=self.url, api_key=self.keys[who], max_retries=0)

    def openai(self, who: str = "main") -> openai.OpenAI:
        return openai.OpenAI(base_url=f"{self.url}/v1", api_key=self.keys[who], max_retries=0)

    def event(self, request_id: str, who: str = "main", timeout: float = 10.0) -> dict[str, Any]:
        """The cost event of one request, once the ledger has it."""
        deadline = time.monotonic() + timeout
        while True:
            answer = httpx.get(
                f"{self.url}/admin/costs",
                params={"tenant": self.tenants[who], "format": "ndjson"},
                headers=ADMIN,
            )
            found = [orjson.loads(line) for line in answer.text.splitlines() if line.strip()]
            mine = [event for event in found if event["id"] == request_id]
            if mine or time.monotonic() > deadline:
                assert mine, f"no cost event for {request_id}"
                return mine[0]
            time.sleep(0.1)


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory, mock_url: str, redis_url: str) -> Iterator[Gateway]:
    directory: Path = tmp_path_factory.mktemp("servertools-e2e")
    suffix = uuid.uuid4().hex[:8]
    who = {"main": {}, "budget": {"budget": {"daily_usd": "0.30"}}, "refused": {"server_tools": False}}
    keys = {name: f"sk-{name}-{uuid.uuid4().hex}" for name in who}
    tenants = {name: f"{name}-{suffix}" for name in who}
    config = make_config(tenants={tenants[n]: {"keys": [keys[n]], **extra} for n, extra in who.items()})
    config["providers"]["mock"]["base_url"] = f"{mock_url}/v1"
    config["providers"]["anthropic"] = {
        "base_url": f"{mock_url}/v1",
        "api_key": "sk-upstream",
        "kind": "anthropic",
        "retry": FAST_RETRY,
    }
    config["models"]["claude-sonnet-4-5"] = {
        "provider": "anthropic",
        "context_window": 200_000,
        "max_output_tokens": 64_000,
        "pricing": {"input": "3.00", "output": "15.00", "per_use": {"web_search": SEARCH, "web_fetch": 0}},
    }
    config["models"]["gpt-5.4"]["pricing"]["per_use"] = {"web_search": SEARCH, "file_search": "0.0025"}
    path = write_config(directory / "gateway.yaml", config)
    with gateway_process(path, redis_url, directory) as url:
        yield Gateway(url, keys, tenants)


def search_tool(max_uses: int) -> Any:
    return {"type": "web_search_20250305", "name": "web_search", "max_uses": max_uses}


def test_messages_fifty_searches_are_billed_fifty_searches(gateway: Gateway) -> None:
    raw = gateway.claude().messages.with_raw_response.create(
        model="claude-sonnet-4-5",
        max_tokens=200,
        messages=[{"role": "user", "content": "What happened today?"}],
        tools=[search_tool(50)],
    )
    message = raw.parse()
    assert message.usage.server_tool_use is not None
    assert message.usage.server_tool_use.web_search_requests == 50
    event = gateway.event(raw.headers["x-gateway-request-id"])
    assert event["tool_uses"] == "web_search=50" and event["tool_cost_usd"] == "0.500000000"
    tokens = message.usage.input_tokens * 3_000 + message.usage.output_tokens * 15_000
    assert int(Decimal(event["cost_usd"]) * 10**9) == tokens + 500_000_000


def test_messages_stream_bills_the_searches_of_its_last_usage(gateway: Gateway) -> None:
    with gateway.claude().messages.stream(
        model="claude-sonnet-4-5",
        max_tokens=200,
        messages=[{"role": "user", "content": "Search twice"}],
        tools=[search_tool(3)],
    ) as stream:
        final = stream.get_final_message()
        request_id = stream.response.headers["x-gateway-request-id"]
    assert final.usage.server_tool_use is not None and final.usage.server_tool_use.web_search_requests == 3
    event = gateway.event(request_id)
    assert event["tool_uses"] == "web_search=3" and event["tool_cost_usd"] == "0.030000000"


@pytest.mark.parametrize("stream", [False, True])
def test_responses_web_search_calls_are_billed(gateway: Gateway, stream: bool) -> None:
    client = gateway.openai()
    request = {"model": "gpt-5.4", "input": "Find it", "tools": [{"type": "web_search"}], "max_tool_calls": 5}
    if stream:
        raw_stream = client.responses.with_raw_response.create(**request, stream=True)
        request_id = raw_stream.headers["x-gateway-request-id"]
        finals = [event.response for event in raw_stream.parse() if event.type == "response.completed"]
        (response,) = finals
    else:
        raw = client.responses.with_raw_response.create(**request)
        response, request_id = raw.parse(), raw.headers["x-gateway-request-id"]
    assert [item.type for item in response.output].count("web_search_call") == 5
    event = gateway.event(request_id)
    assert event["tool_uses"] == "web_search=5" and event["tool_cost_usd"] == "0.050000000"


def test_a_budget_refuses_what_max_uses_could_cost(gateway: Gateway) -> None:
    client = gateway.claude("budget")
    small = client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=100,
        messages=[{"role": "user", "content": "hi"}],
        tools=[search_tool(2)],
    )
    assert small.usage.server_tool_use is not None and small.usage.server_tool_use.web_search_requests == 2
    with pytest.raises(anthropic.RateLimitError) as caught:
        client.messages.create(
            model="claude-sonnet-4-5",
            max_tokens=100,
            messages=[{"role": "user", "content": "hi"}],
            tools=[search_tool(50)],
        )
    assert "may cost up to $0.50" in str(caught.value)


def test_a_tenant_refusing_server_tools_gets_the_sdks_bad_request(gateway: Gateway) -> None:
    with pytest.raises(anthropic.BadRequestError) as refused_claude:
        gateway.claude("refused").messages.create(
            model="claude-sonnet-4-5",
            max_tokens=100,
            messages=[{"role": "user", "content": "hi"}],
            tools=[search_tool(1)],
        )
    assert "web_search_20250305" in str(refused_claude.value)
    with pytest.raises(openai.BadRequestError) as refused_openai:
        gateway.openai("refused").responses.create(
            model="gpt-5.4", input="hi", tools=[{"type": "web_search_preview"}]
        )
    assert refused_openai.value.code == "server_tool_not_allowed"
    plain = gateway.claude("refused").messages.create(
        model="claude-sonnet-4-5", max_tokens=50, messages=[{"role": "user", "content": "hi"}]
    )
    assert plain.content
