"""The official anthropic SDK through a real gateway process to the mock Anthropic upstream
(``tests.mock.anthropic``): Messages streamed and not, tools, thinking with signatures, ``cache_control``
on system, tools and messages, ``count_tokens``, the SDK's own exception types, and one ledger entry per
upstream call."""

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
import orjson
import pytest

from tests.e2e.ledger_helpers import wait_until_written
from tests.e2e.processes import gateway_process
from tests.factories import make_config, write_config
from tests.mock.anthropic import THINKING, signature_for

pytestmark = pytest.mark.e2e

ADMIN = {"authorization": "Bearer admin-e2e"}  # processes.gateway_process sets GATEWAY_ADMIN_KEY
FAST_RETRY = {"attempts": 3, "backoff_initial": 0.001, "backoff_max": 0.01, "retry_after_cap": 0.05}
ANTHROPIC_CACHE = {
    "min_prefix_tokens": 1024,
    "granularity": 1,
    "retention_seconds": 300,
    "extended_retention_seconds": 3600,
    "write_multiplier": "1.25",
}
WEATHER = {
    "name": "get_weather",
    "description": "Current weather in a city",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
LONG = "The deploy log lists every service, its version and the time it took to start. " * 150


@dataclass(frozen=True, slots=True)
class Gateway:
    url: str
    keys: dict[str, str]
    tenants: dict[str, str]

    def client(self, who: str = "main", **options: Any) -> anthropic.Anthropic:
        return anthropic.Anthropic(base_url=self.url, api_key=self.keys[who], max_retries=0, **options)

    def events(self, who: str = "main") -> list[dict[str, Any]]:
        """The tenant's cost events (its ledger), oldest first, once every event recorded is written."""
        wait_until_written(self.url)
        answer = httpx.get(
            f"{self.url}/admin/costs", params={"tenant": self.tenants[who], "format": "ndjson"}, headers=ADMIN
        )
        answer.raise_for_status()
        return [orjson.loads(line) for line in answer.text.splitlines() if line.strip()]

    def events_after(self, who: str, count: int, *, timeout: float = 10.0) -> list[dict[str, Any]]:
        """The tenant's events once there are at least ``count`` (written in the background)."""
        deadline = time.monotonic() + timeout
        events = self.events(who)
        while len(events) < count and time.monotonic() < deadline:
            time.sleep(0.1)
            events = self.events(who)
        return events


def nanos(event: dict[str, Any]) -> int:
    """An exported event's cost, in nano-dollars."""
    return int(Decimal(event["cost_usd"]) * 10**9)


def config_for(mock_url: str, tenants: dict[str, str]) -> dict[str, Any]:
    anthropic_provider = {
        "base_url": f"{mock_url}/v1",
        "api_key": "sk-upstream",
        "kind": "anthropic",
        "retry": FAST_RETRY,
        "prompt_cache": ANTHROPIC_CACHE,
    }
    config = make_config(
        tenants={
            name: {"keys": [key], **({"budget": {"daily_usd": "0.05"}} if who == "budget" else {})}
            for who, (name, key) in tenants.items()
        }
    )
    config["providers"]["mock"]["base_url"] = f"{mock_url}/v1"
    config["providers"]["anthropic"] = {**anthropic_provider, "messages_count_tokens": True}
    config["providers"]["anthropic-plain"] = anthropic_provider
    sonnet_tier = {
        "above_input_tokens": 200_000,
        "input_multiplier": 2,
        "cached_input_multiplier": 2,
        "output_multiplier": "1.5",
    }
    config["models"].update(
        {
            "claude-sonnet-4-5": {
                "provider": "anthropic",
                "context_window": 1_000_000,
                "max_output_tokens": 64_000,
                "pricing": {
                    "input": "3.00",
                    "cached_input": "0.30",
                    "output": "15.00",
                    "tiers": [sonnet_tier],
                },
            },
            "claude-opus-4-7": {
                "provider": "anthropic",
                "context_window": 200_000,
                "max_output_tokens": 64_000,
                "fallbacks": ["claude-haiku-4-5"],
                "pricing": {"input": "5.00", "cached_input": "0.50", "output": "25.00"},
            },
            "claude-haiku-4-5": {
                "provider": "anthropic-plain",
                "context_window": 200_000,
                "max_output_tokens": 64_000,
                "pricing": {"input": "1.00", "cached_input": "0.10", "output": "5.00"},
            },
        }
    )
    return config


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory, mock_url: str, redis_url: str) -> Iterator[Gateway]:
    directory: Path = tmp_path_factory.mktemp("messages-e2e")
    suffix = uuid.uuid4().hex[:8]
    tenants = {
        who: (f"{who}-{suffix}", f"sk-{who}-{uuid.uuid4().hex}") for who in ("main", "budget", "other")
    }
    path = write_config(directory / "gateway.yaml", config_for(mock_url, tenants))
    with gateway_process(path, redis_url, directory) as url:
        yield Gateway(
            url,
            keys={who: key for who, (_, key) in tenants.items()},
            tenants={who: name for who, (name, _) in tenants.items()},
        )


def seen(mock: httpx.Client, path: str = "/v1/messages") -> list[dict[str, Any]]:
    return [r for r in mock.get("/_requests").json()["requests"] if r["path"] == path]


def test_messages_non_stream(gateway: Gateway, mock: httpx.Client) -> None:
    before = len(gateway.events())
    raw = gateway.client().messages.with_raw_response.create(
        model="claude-sonnet-4-5",
        max_tokens=256,
        system="Be brief.",
        messages=[{"role": "user", "content": "Hello gateway"}],
        metadata={"user_id": "u-1"},
    )
    message = raw.parse()
    assert message.content[0].type == "text" and message.content[0].text == "echo: Hello gateway"
    assert message.stop_reason == "end_turn" and message.usage.input_tokens > 0
    assert raw.headers["x-gateway-action"] == "forward"
    assert raw.headers["x-gateway-model"] == "claude-sonnet-4-5"
    assert int(raw.headers["x-gateway-prompt-tokens"]) > 0
    assert raw.headers["x-gateway-prompt-tokens-approximate"] == "true"
    assert raw.headers["request-id"] == raw.headers["x-gateway-request-id"]
    upstream = seen(mock)[-1]
    assert upstream["headers"]["x-api-key"] == "<set>" and "authorization" not in upstream["headers"]
    assert upstream["headers"]["anthropic-version"] == raw.http_response.request.headers["anthropic-version"]
    assert upstream["body"]["metadata"] == {"user_id": "u-1"} and upstream["body"]["system"] == "Be brief."
    events = gateway.events_after("main", before + 1)
    assert len(events) == before + 1
    event = events[-1]
    assert event["id"] == raw.headers["x-gateway-request-id"] and event["model"] == "claude-sonnet-4-5"
    assert (
        event["input_tokens"] == message.usage.input_tokens
        and event["output_tokens"] == message.usage.output_tokens
    )
    assert nanos(event) == 3_000 * event["input_tokens"] + 15_000 * event["output_tokens"]


def test_messages_stream_with_the_beta_query_and_headers(gateway: Gateway, mock: httpx.Client) -> None:
    before = len(gateway.events())
    betas = "interleaved-thinking-2025-05-14,fine-grained-tool-streaming-2025-05-14"
    client = gateway.client(default_headers={"anthropic-beta": betas})
    with client.messages.stream(
        model="claude-sonnet-4-5",
        max_tokens=256,
        messages=[{"role": "user", "content": "stream this please"}],
        extra_query={"beta": "true"},
    ) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == "echo: stream this please"
    assert final.usage.output_tokens > 1  # the cumulative message_delta's, not message_start's 1
    upstream = seen(mock)[-1]
    assert upstream["query"] == "beta=true"
    assert upstream["headers"]["anthropic-beta"] == betas
    events = gateway.events_after("main", before + 1)
    assert len(events) == before + 1
    assert events[-1]["stream"] is True and events[-1]["output_tokens"] == final.usage.output_tokens


@pytest.mark.parametrize("stream", [False, True])
def test_messages_tool_round_trip(gateway: Gateway, mock: httpx.Client, stream: bool) -> None:
    client = gateway.client()
    question = [{"role": "user", "content": "Weather in Paris?"}]
    first = client.messages.create(
        model="claude-sonnet-4-5", max_tokens=256, messages=question, tools=[WEATHER]
    )
    use = next(block for block in first.content if block.type == "tool_use")
    assert first.stop_reason == "tool_use" and use.name == "get_weather" and use.input == {"city": "Paris"}
    history: list[Any] = [
        *question,
        {"role": "assistant", "content": [block.model_dump(exclude_none=True) for block in first.content]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "18C and sunny"}],
        },
    ]
    if stream:
        with client.messages.stream(
            model="claude-sonnet-4-5", max_tokens=256, messages=history, tools=[WEATHER]
        ) as events:
            answer = events.get_final_message()
    else:
        answer = client.messages.create(
            model="claude-sonnet-4-5", max_tokens=256, messages=history, tools=[WEATHER]
        )
    assert answer.content[0].type == "text" and answer.content[0].text == "The tool said: 18C and sunny"
    assert seen(mock)[-1]["body"]["messages"] == history


def test_messages_split_tool_pair_raises_the_upstreams_bad_request(
    gateway: Gateway, mock: httpx.Client
) -> None:
    history: list[Any] = [
        {"role": "user", "content": "Weather in Paris?"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "toolu_x", "name": "get_weather", "input": {}}],
        },
        {"role": "user", "content": "never mind"},
    ]
    with pytest.raises(anthropic.BadRequestError) as caught:
        gateway.client().messages.create(
            model="claude-sonnet-4-5", max_tokens=64, messages=history, tools=[WEATHER]
        )
    assert "`tool_use` ids were found without `tool_result` blocks immediately after: toolu_x" in str(
        caught.value
    )
    assert caught.value.body["error"]["type"] == "invalid_request_error"  # type: ignore[index]


@pytest.mark.parametrize("stream", [False, True])
def test_messages_thinking_signatures_come_back_byte_identical(
    gateway: Gateway, mock: httpx.Client, stream: bool
) -> None:
    client = gateway.client()
    thinking = {"type": "enabled", "budget_tokens": 2048}
    question = [{"role": "user", "content": "Weather in Paris?"}]
    first = client.messages.create(
        model="claude-sonnet-4-5", max_tokens=4096, messages=question, tools=[WEATHER], thinking=thinking
    )
    blocks = [block.model_dump(exclude_none=True) for block in first.content]
    assert blocks[0]["type"] == "thinking" and blocks[0]["signature"] == signature_for(
        "claude-sonnet-4-5", THINKING
    )
    use = next(block for block in blocks if block["type"] == "tool_use")
    history: list[Any] = [
        *question,
        {"role": "assistant", "content": blocks},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use["id"], "content": "18C"}]},
    ]
    options: dict[str, Any] = {"model": "claude-sonnet-4-5", "max_tokens": 4096, "tools": [WEATHER]}
    if stream:
        with client.messages.stream(messages=history, thinking=thinking, **options) as events:
            answer = events.get_final_message()
    else:
        answer = client.messages.create(messages=history, thinking=thinking, **options)
    assert [block.type for block in answer.content] == ["thinking", "text"]
    sent = seen(mock)[-1]
    assert sent["body"]["messages"][1]["content"][0] == blocks[0]
    assert blocks[0]["signature"] in sent["raw"]  # the bytes went on as they came
    edited = [*history]
    edited[1] = {"role": "assistant", "content": [{**blocks[0], "thinking": "Something else."}, *blocks[1:]]}
    with pytest.raises(anthropic.BadRequestError) as caught:
        client.messages.create(messages=edited, thinking=thinking, **options)
    assert "Invalid `signature` in `thinking` block" in str(caught.value)


def test_messages_fallback_drops_thinking_only_the_model_asked_for_can_verify(
    gateway: Gateway, mock: httpx.Client
) -> None:
    thinking_block = {
        "type": "thinking",
        "thinking": THINKING,
        "signature": signature_for("claude-opus-4-7", THINKING),
    }
    history: list[Any] = [
        {"role": "user", "content": "First question"},
        {"role": "assistant", "content": [thinking_block, {"type": "text", "text": "First answer"}]},
        {"role": "user", "content": "Second question"},
    ]
    mock.post("/_control", json={"fail_next": 3, "fail_status": 503})  # every attempt on claude-opus-4-7
    raw = gateway.client().messages.with_raw_response.create(
        model="claude-opus-4-7", max_tokens=256, messages=history
    )
    assert raw.parse().content[0].text == "echo: Second question"  # type: ignore[union-attr]
    assert raw.headers["x-gateway-model"] == "claude-haiku-4-5"
    assert raw.headers["x-gateway-thinking-dropped"] == "1"
    sent = seen(mock)[-1]["body"]
    assert sent["model"] == "claude-haiku-4-5"
    assert sent["messages"][1]["content"] == [{"type": "text", "text": "First answer"}]


def test_messages_cache_control_on_system_tools_and_messages(gateway: Gateway, mock: httpx.Client) -> None:
    before = len(gateway.events())
    tools = [{**WEATHER, "cache_control": {"type": "ephemeral", "ttl": "1h"}}]
    system = [{"type": "text", "text": LONG, "cache_control": {"type": "ephemeral", "ttl": "1h"}}]

    def turn(text: str) -> dict[str, Any]:
        return {
            "role": "user",
            "content": [{"type": "text", "text": text, "cache_control": {"type": "ephemeral"}}],
        }

    client = gateway.client()
    options: dict[str, Any] = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 64,
        "tools": tools,
        "system": system,
    }
    first = client.messages.create(messages=[turn(f"one {LONG}")], **options, tool_choice={"type": "none"})
    second = client.messages.create(
        messages=[turn(f"one {LONG}"), {"role": "assistant", "content": "ok"}, turn("two")],
        tool_choice={"type": "none"},
        **options,
    )
    assert first.usage.cache_read_input_tokens == 0 and first.usage.cache_creation is not None
    assert first.usage.cache_creation.ephemeral_1h_input_tokens > 1000  # tools and system, for an hour
    assert first.usage.cache_creation.ephemeral_5m_input_tokens > 1000  # the first turn
    assert second.usage.cache_read_input_tokens == first.usage.cache_creation_input_tokens
    sent = seen(mock)[-1]["body"]
    assert sent["tools"] == tools and sent["system"] == system  # every breakpoint where the client put it
    assert sent["messages"][0]["content"][0]["cache_control"] == {"type": "ephemeral"}
    events = gateway.events_after("main", before + 2)[-2:]
    for event, usage in zip(events, (first.usage, second.usage), strict=True):
        written = usage.cache_creation_input_tokens or 0
        read = usage.cache_read_input_tokens or 0
        assert event["input_tokens"] == usage.input_tokens + written + read
        assert event["cached_tokens"] == read and event["cache_write_tokens"] == written
    one_hour = first.usage.cache_creation.ephemeral_1h_input_tokens
    five = first.usage.cache_creation.ephemeral_5m_input_tokens
    expected = (
        3_000 * first.usage.input_tokens
        + 6_000 * one_hour
        + 3_750 * five
        + 15_000 * first.usage.output_tokens
    )
    assert nanos(events[0]) == expected  # writes 2x for an hour, 1.25x for five minutes


def test_messages_count_tokens_is_the_providers_never_below_the_gateways(
    gateway: Gateway, mock: httpx.Client
) -> None:
    client = gateway.client()
    messages = [{"role": "user", "content": f"Count these words, please: {LONG}"}]
    mock.post("/_control", json={"anthropic_count_factor": 1.3})
    counted = client.messages.with_raw_response.count_tokens(
        model="claude-sonnet-4-5", messages=messages, system="Terse."
    )
    provider = int(counted.headers["x-gateway-confirmed-tokens"])
    estimate = int(counted.headers["x-gateway-prompt-tokens"])
    assert counted.parse().input_tokens == provider > estimate
    assert seen(mock, "/v1/messages/count_tokens")[-1]["body"]["system"] == "Terse."
    mock.post("/_control", json={"anthropic_count_factor": 0.5})
    low = client.messages.with_raw_response.count_tokens(
        model="claude-sonnet-4-5", messages=messages, system="Terse."
    )
    assert int(low.headers["x-gateway-confirmed-tokens"]) < estimate
    assert low.parse().input_tokens == int(low.headers["x-gateway-prompt-tokens"]) == estimate
    plain = client.messages.with_raw_response.count_tokens(model="claude-haiku-4-5", messages=messages)
    assert "x-gateway-confirmed-tokens" not in plain.headers  # its provider is not asked
    assert plain.parse().input_tokens == int(plain.headers["x-gateway-prompt-tokens"]) > 0


def test_messages_errors_raise_the_sdks_own_types(gateway: Gateway, mock: httpx.Client) -> None:
    message: list[Any] = [{"role": "user", "content": "hi"}]
    with pytest.raises(anthropic.AuthenticationError) as unauthorised:
        anthropic.Anthropic(base_url=gateway.url, api_key="sk-nobody", max_retries=0).messages.create(
            model="claude-sonnet-4-5", max_tokens=16, messages=message
        )
    assert unauthorised.value.body["error"]["type"] == "authentication_error"  # type: ignore[index]
    with pytest.raises(anthropic.BadRequestError):
        gateway.client().messages.create(model="claude-sonnet-4-5", max_tokens=16, messages=[])
    with pytest.raises(anthropic.NotFoundError):
        gateway.client().messages.create(model="claude-unknown", max_tokens=16, messages=message)
    with pytest.raises(anthropic.BadRequestError) as wrong_kind:
        gateway.client().messages.create(model="gpt-5.4", max_tokens=16, messages=message)
    assert "not served by an Anthropic provider" in str(wrong_kind.value)
    with pytest.raises(anthropic.RateLimitError) as budget:
        gateway.client("budget").messages.create(
            model="claude-sonnet-4-5", max_tokens=20_000, messages=message
        )
    assert "budget_exceeded" in str(budget.value)
    small = gateway.client("budget").messages.create(
        model="claude-sonnet-4-5", max_tokens=100, messages=message
    )
    assert small.stop_reason == "end_turn"  # the hold is sized by max_tokens: a small one fits
    mock.post("/_control", json={"fail_next": 1, "fail_status": 529})  # passed through, not retried
    with pytest.raises(anthropic.OverloadedError) as overloaded:
        gateway.client().messages.create(model="claude-sonnet-4-5", max_tokens=16, messages=message)
    assert overloaded.value.body["error"]["type"] == "overloaded_error"  # type: ignore[index]
    mock.post("/_control", json={"fail_next": 3, "fail_status": 500})
    with pytest.raises(anthropic.InternalServerError):
        gateway.client().messages.create(model="claude-sonnet-4-5", max_tokens=16, messages=message)


def test_messages_error_event_after_the_200_is_the_requests_error(
    gateway: Gateway, mock: httpx.Client
) -> None:
    before = len(gateway.events())
    mock.post("/_control", json={"anthropic_stream_error": "overloaded_error"})
    with pytest.raises(anthropic.APIStatusError) as caught:
        with gateway.client().messages.stream(
            model="claude-sonnet-4-5", max_tokens=64, messages=[{"role": "user", "content": "hi"}]
        ) as stream:
            for _ in stream.text_stream:
                pass
    assert "Overloaded" in str(caught.value)
    events = gateway.events_after("main", before + 1)
    assert len(events) == before + 1  # the call ran: it is billed once, on what it produced


def test_messages_models_and_event_logging_for_claude_code(gateway: Gateway) -> None:
    client = gateway.client()
    listed = client.models.list(limit=2)
    assert [model.id for model in listed.data] == ["claude-sonnet-4-5", "claude-opus-4-7"]
    assert listed.has_more and listed.last_id == "claude-opus-4-7"
    assert [model.id for model in client.models.list()] == [
        "claude-sonnet-4-5",
        "claude-opus-4-7",
        "claude-haiku-4-5",
    ]
    assert client.models.retrieve("claude-haiku-4-5").type == "model"
    with pytest.raises(anthropic.NotFoundError):
        client.models.retrieve("gpt-5.4")
    openai_list = httpx.get(
        f"{gateway.url}/v1/models", headers={"authorization": f"Bearer {gateway.keys['main']}"}
    )
    assert openai_list.json()["object"] == "list"  # without anthropic-version: OpenAI's list
    logged = httpx.post(f"{gateway.url}/api/event_logging/batch", json={"events": [{"event_name": "x"}]})
    assert logged.status_code == 204 and logged.content == b""
