"""A stream tells its caller what it cost in its last usage: the official SDKs through a real gateway process
to the mock upstream, on chat completions, Responses and Messages. The headers, sent before the usage, say
their cost is an estimate; the event that brings the usage carries the exact figure (``x_gateway_cost_usd``,
``x_gateway_saving_usd``, ``x_gateway_saving_basis``), the same as the ledger's for the request, side calls
included."""

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
from tests.fixtures.conversations import conversation_of

pytestmark = pytest.mark.e2e

ADMIN = {"authorization": "Bearer admin-e2e"}  # processes.gateway_process sets GATEWAY_ADMIN_KEY
FIELDS = ("x_gateway_cost_usd", "x_gateway_saving_usd", "x_gateway_saving_basis")
LONG = "The deploy log lists every service, its version and the time it took to start. " * 150


@dataclass(frozen=True, slots=True)
class Gateway:
    url: str
    tenant: str
    key: str

    def openai(self) -> openai.OpenAI:
        return openai.OpenAI(base_url=f"{self.url}/v1", api_key=self.key, max_retries=0, timeout=60)

    def anthropic(self) -> anthropic.Anthropic:
        return anthropic.Anthropic(base_url=self.url, api_key=self.key, max_retries=0, timeout=60)

    def events_of(self, client_request_id: str, *, timeout: float = 10.0) -> list[dict[str, Any]]:
        """The cost events of the request the client sent as ``x-request-id: client_request_id`` (its own
        and its side calls'), once its own is in the ledger."""
        deadline = time.monotonic() + timeout
        while True:
            answer = httpx.get(
                f"{self.url}/admin/costs", params={"tenant": self.tenant, "format": "ndjson"}, headers=ADMIN
            )
            answer.raise_for_status()
            events = [orjson.loads(line) for line in answer.text.splitlines() if line.strip()]
            mine = [e for e in events if e["client_request_id"] == client_request_id]
            if any(e["parent_id"] is None for e in mine) or time.monotonic() > deadline:
                return mine
            time.sleep(0.05)


def tagged() -> dict[str, str]:
    """A fresh ``x-request-id``: the ledger keeps it with the request's events."""
    return {"x-request-id": f"stream-cost-{uuid.uuid4().hex}"}


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory, mock_url: str, redis_url: str) -> Iterator[Gateway]:
    directory: Path = tmp_path_factory.mktemp("stream-cost-e2e")
    tenant, key = f"streams-{uuid.uuid4().hex[:8]}", f"sk-streams-{uuid.uuid4().hex}"
    config = make_config(tenants={tenant: {"keys": [key]}})
    config["providers"]["mock"]["base_url"] = f"{mock_url}/v1"
    config["providers"]["anthropic"] = {
        "base_url": f"{mock_url}/v1",
        "api_key": "sk-upstream",
        "kind": "anthropic",
        "prompt_cache": {"min_prefix_tokens": 1024, "granularity": 1, "write_multiplier": "1.25"},
    }
    config["models"]["claude-sonnet-4-5"] = {
        "provider": "anthropic",
        "context_window": 1_000_000,
        "max_output_tokens": 64_000,
        "pricing": {"input": "3.00", "cached_input": "0.30", "output": "15.00"},
    }
    path = write_config(directory / "gateway.yaml", config)
    with gateway_process(path, redis_url, directory) as url:
        yield Gateway(url, tenant, key)


def usd(value: object) -> Decimal:
    assert isinstance(value, str), value  # amounts leave as decimal strings, never floats
    return Decimal(value)


def assert_is_the_ledgers(fields: dict[str, Any], events: list[dict[str, Any]]) -> None:
    """The usage's cost fields are the ledger's figures for the request: its events' cost and saving
    summed (side calls included), and the basis of its own event; exact, so not marked estimated."""
    [main] = [e for e in events if e["parent_id"] is None]
    assert usd(fields["x_gateway_cost_usd"]) == sum(usd(e["cost_usd"]) for e in events) > 0
    assert usd(fields["x_gateway_saving_usd"]) == sum(usd(e["saving_usd"]) for e in events)
    assert fields["x_gateway_saving_basis"] == main["counterfactual_basis"]
    assert "x_gateway_cost_estimated" not in fields


def extras(usage: object) -> dict[str, Any]:
    """The gateway's fields among those the SDK's usage model does not declare but kept."""
    extra = getattr(usage, "model_extra", None)
    assert extra is not None, usage
    return {name: value for name, value in extra.items() if name.startswith("x_gateway_")}


def test_chat_stream_with_usage_ends_with_its_exact_cost(gateway: Gateway) -> None:
    tag = tagged()
    stream = gateway.openai().chat.completions.create(
        model="gpt-5.4",
        messages=[{"role": "user", "content": "Say something about streams."}],
        stream=True,
        stream_options={"include_usage": True},
        extra_headers=tag,
    )
    chunks = list(stream)
    assert stream.response.headers["x-gateway-cost-estimated"] == "true"  # sent before the usage
    *before, last = chunks
    assert last.usage is not None and last.choices == []
    assert all(chunk.usage is None for chunk in before)
    fields = extras(last.usage)
    assert set(fields) == set(FIELDS)
    assert last.usage.x_gateway_cost_usd == fields["x_gateway_cost_usd"]  # as an attribute too
    assert_is_the_ledgers(fields, gateway.events_of(tag["x-request-id"]))


def test_chat_stream_without_usage_gets_no_usage_chunk(gateway: Gateway) -> None:
    stream = gateway.openai().chat.completions.create(
        model="gpt-5.4", messages=[{"role": "user", "content": "No usage, please."}], stream=True
    )
    chunks = list(stream)
    assert chunks and all(chunk.usage is None and chunk.choices for chunk in chunks)
    assert stream.response.headers["x-gateway-cost-estimated"] == "true"


def test_compressed_chat_stream_counts_its_summary_calls(gateway: Gateway) -> None:
    tag = tagged()
    messages: list[Any] = conversation_of(258_000)
    with gateway.openai().chat.completions.stream(
        model="gpt-5.4", messages=messages, stream_options={"include_usage": True}, extra_headers=tag
    ) as stream:
        completion = stream.get_final_completion()
    events = gateway.events_of(tag["x-request-id"])
    assert [e["action"] for e in events if e["parent_id"] is None] == ["compress"]
    assert any(e["action"] == "summary" for e in events), "the summary calls have their own events"
    assert completion.usage is not None
    fields = extras(completion.usage)
    assert_is_the_ledgers(fields, events)
    assert usd(fields["x_gateway_saving_usd"]) != 0  # what the compression saved or lost, net of its calls


def test_responses_stream_ends_with_its_exact_cost(gateway: Gateway) -> None:
    tag = tagged()
    with gateway.openai().responses.stream(
        model="gpt-5.4", input="Hello streamed responses", extra_headers=tag
    ) as stream:
        events = list(stream)
        final = stream.get_final_response()
    [completed] = [event for event in events if event.type == "response.completed"]
    assert completed.response.usage is not None
    fields = extras(completed.response.usage)
    assert set(fields) == set(FIELDS)
    assert final.usage is not None and extras(final.usage) == fields
    assert_is_the_ledgers(fields, gateway.events_of(tag["x-request-id"]))


def test_messages_stream_ends_with_its_exact_cost(gateway: Gateway) -> None:
    system: Any = [{"type": "text", "text": LONG, "cache_control": {"type": "ephemeral"}}]
    for turn in range(2):  # the second reads the cache the first wrote
        tag = tagged()
        with gateway.anthropic().messages.stream(
            model="claude-sonnet-4-5",
            max_tokens=256,
            system=system,
            messages=[{"role": "user", "content": f"What started last? ({turn})"}],
            extra_headers=tag,
        ) as stream:
            events = list(stream)
            assert stream.response.headers["x-gateway-cost-estimated"] == "true"
        [delta] = [event for event in events if event.type == "message_delta"]
        fields = extras(delta.usage)
        assert set(fields) == set(FIELDS)
        [main] = found = gateway.events_of(tag["x-request-id"])
        assert_is_the_ledgers(fields, found)
        assert (main["cached_tokens"] > 0) == (turn == 1)
