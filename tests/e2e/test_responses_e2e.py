"""The official openai SDK's ``client.responses`` through a real gateway process to the mock upstream."""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
import openai
import pytest

from tests.e2e.ledger_helpers import wait_until_written
from tests.factories import TENANT_KEY
from tests.mock.responses import ENCRYPTED

WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "Current weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


def ledger_requests(gateway_url: str) -> int:
    wait_until_written(gateway_url)  # the events of earlier requests all counted
    usage = httpx.get(f"{gateway_url}/v1/gateway/usage", headers={"authorization": f"Bearer {TENANT_KEY}"})
    requests: int = usage.json()["day"]["requests"]
    return requests


def wait_for_ledger(gateway_url: str, at_least: int, timeout: float = 10.0) -> int:
    deadline = time.monotonic() + timeout
    seen = ledger_requests(gateway_url)
    while seen < at_least and time.monotonic() < deadline:
        time.sleep(0.1)
        seen = ledger_requests(gateway_url)
    return seen


def last_seen(mock: httpx.Client, path: str = "/v1/responses") -> dict[str, Any]:
    requests = [r for r in mock.get("/_requests").json()["requests"] if r["path"] == path]
    return requests[-1]


def test_responses_non_stream(client: openai.OpenAI, mock: httpx.Client, gateway_url: str) -> None:
    before = ledger_requests(gateway_url)
    raw = client.responses.with_raw_response.create(
        model="gpt-5.4", input="Hello gateway", instructions="Be brief.", store=False, prompt_cache_key="k1"
    )
    response = raw.parse()
    assert response.output_text == "echo: Hello gateway"
    assert response.usage is not None and response.usage.input_tokens > 0
    assert raw.headers["x-gateway-action"] == "forward"
    assert int(raw.headers["x-gateway-prompt-tokens"]) > 0
    body = last_seen(mock)["body"]
    assert body["instructions"] == "Be brief." and body["store"] is False and body["prompt_cache_key"] == "k1"
    assert wait_for_ledger(gateway_url, before + 1) >= before + 1


def test_responses_stream(client: openai.OpenAI, mock: httpx.Client, gateway_url: str) -> None:
    before = ledger_requests(gateway_url)
    events = list(client.responses.create(model="gpt-5.4", input="stream this please", stream=True))
    text = "".join(event.delta for event in events if event.type == "response.output_text.delta")
    assert text == "echo: stream this please"
    assert events[-1].type == "response.completed"
    assert events[-1].response.usage is not None and events[-1].response.usage.output_tokens > 0
    assert "stream_options" not in last_seen(mock)["body"]  # the Responses stream needs no usage option
    assert wait_for_ledger(gateway_url, before + 1) >= before + 1


def test_responses_function_call_round_trip(client: openai.OpenAI, mock: httpx.Client) -> None:
    first = client.responses.create(model="gpt-5.4", input="Weather in Paris?", tools=[WEATHER])
    call = next(item for item in first.output if item.type == "function_call")
    assert call.name == "get_weather" and json.loads(call.arguments) == {"city": "Paris"}
    history: list[Any] = [
        {"role": "user", "content": "Weather in Paris?"},
        {"type": "function_call", "call_id": call.call_id, "name": call.name, "arguments": call.arguments},
        {"type": "function_call_output", "call_id": call.call_id, "output": "18C and sunny"},
    ]
    second = client.responses.create(model="gpt-5.4", input=history, tools=[WEATHER])
    assert second.output_text == "The tool said: 18C and sunny"
    sent = last_seen(mock)["body"]
    assert sent["input"] == history
    assert sent["tools"] == [WEATHER]


@pytest.mark.parametrize("stream", [False, True])
def test_responses_reasoning_items_come_back_byte_identical_upstream(
    client: openai.OpenAI, mock: httpx.Client, stream: bool
) -> None:
    first = client.responses.create(
        model="gpt-5.4",
        input="Think first.",
        reasoning={"effort": "low"},
        include=["reasoning.encrypted_content"],
        store=False,
    )
    reasoning = next(item for item in first.output if item.type == "reasoning")
    assert reasoning.encrypted_content == ENCRYPTED
    history: list[Any] = [
        {"role": "user", "content": "Think first."},
        reasoning.model_dump(exclude_none=True),
        *(item.model_dump(exclude_none=True) for item in first.output if item.type == "message"),
        {"role": "user", "content": "And again."},
    ]
    again = client.responses.create(
        model="gpt-5.4",
        input=history,
        reasoning={"effort": "low"},
        include=["reasoning.encrypted_content"],
        store=False,
        stream=stream,
    )
    if stream:
        assert [event.type for event in again][-1] == "response.completed"
    seen = last_seen(mock)
    assert seen["body"]["input"][1]["encrypted_content"] == ENCRYPTED
    assert seen["body"]["input"][1]["id"] == reasoning.id
    sent = json.dumps(seen["body"]["input"][1]["encrypted_content"])
    assert json.loads(sent) == reasoning.encrypted_content


def test_responses_retrieve_and_delete_by_id(client: openai.OpenAI, mock: httpx.Client) -> None:
    created = client.responses.create(model="gpt-5.4", input="keep me")
    fetched = client.responses.retrieve(created.id)
    assert fetched.id == created.id and fetched.output_text == "echo: keep me"
    client.responses.delete(created.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(created.id)


def test_responses_previous_response_id_chain(client: openai.OpenAI, mock: httpx.Client) -> None:
    first = client.responses.create(model="gpt-5.4", input="one")
    raw = client.responses.with_raw_response.create(
        model="gpt-5.4", input="two", previous_response_id=first.id
    )
    assert raw.parse().output_text == "echo: two"
    assert "x-gateway-warning" not in raw.headers  # remembered, and far below the warning line
    assert last_seen(mock)["body"]["previous_response_id"] == first.id


def test_responses_background_is_billed_once_when_polling_sees_it_end(
    client: openai.OpenAI, mock: httpx.Client, gateway_url: str
) -> None:
    mock.post("/_control", json={"background_polls": 2})
    before = ledger_requests(gateway_url)
    created = client.responses.create(model="gpt-5.4", input="a long job", background=True)
    statuses = [created.status]
    while statuses[-1] in ("queued", "in_progress"):
        statuses.append(client.responses.retrieve(created.id).status)
    streamed = client.responses.create(model="gpt-5.4", input="another job", background=True)
    events = list(client.responses.retrieve(streamed.id, stream=True, starting_after=0))
    assert statuses == ["queued", "in_progress", "in_progress", "completed"]
    assert events[-1].type == "response.completed"
    assert "stream=true" in last_seen(mock, f"/v1/responses/{streamed.id}")["query"]
    assert wait_for_ledger(gateway_url, before + 2) == before + 2
    client.responses.retrieve(created.id)  # read once more: billed already
    assert wait_for_ledger(gateway_url, before + 3, timeout=1.0) == before + 2
