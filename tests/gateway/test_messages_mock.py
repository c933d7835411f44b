"""The mock Anthropic upstream behaves as the API does where the gateway's tests rely on it: it refuses
split tool pairs and altered signatures with Anthropic's messages, and reads and writes its cache per
``cache_control`` breakpoint."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from starlette.testclient import TestClient

from tests.mock.anthropic import THINKING, signature_for
from tests.mock.upstream import create_mock_app

HEADERS = {"x-api-key": "sk-upstream", "anthropic-version": "2023-06-01"}
LONG = "The deploy log lists every service, its version and the time it took to start. " * 120


@pytest.fixture
def mock() -> Iterator[TestClient]:
    with TestClient(create_mock_app(), headers=HEADERS) as client:
        yield client


def body(messages: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"model": "claude-sonnet-4-5", "max_tokens": 512, "messages": messages, **extra}


def user(text: str, **extra: Any) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text, **extra}]}


def tool_turn(thinking: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    use = {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}
    result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "18C"}
    assistant = [thinking, use] if thinking else [use]
    return [
        user("Weather?"),
        {"role": "assistant", "content": assistant},
        {"role": "user", "content": [result]},
    ]


def error_of(response: Any) -> dict[str, Any]:
    data: dict[str, Any] = response.json()
    assert data["type"] == "error"
    return data["error"]


def test_mock_refuses_a_tool_use_without_its_result(mock: TestClient) -> None:
    history = tool_turn()
    history[2] = user("never mind")
    response = mock.post("/v1/messages", json=body(history))
    assert response.status_code == 400
    assert error_of(response) == {
        "type": "invalid_request_error",
        "message": "messages.2: `tool_use` ids were found without `tool_result` blocks immediately after: "
        "toolu_1. Each `tool_use` block must have a corresponding `tool_result` block in the next message.",
    }


def test_mock_refuses_a_result_without_its_tool_use(mock: TestClient) -> None:
    history = tool_turn()
    del history[1]
    history.insert(1, {"role": "assistant", "content": "Let me look."})
    response = mock.post("/v1/messages", json=body(history))
    assert response.status_code == 400
    assert "unexpected `tool_use_id` found in `tool_result` blocks: toolu_1" in error_of(response)["message"]


def test_mock_refuses_a_result_after_text(mock: TestClient) -> None:
    history = tool_turn()
    history[2]["content"].insert(0, {"type": "text", "text": "Here:"})
    response = mock.post("/v1/messages", json=body(history))
    assert response.status_code == 400
    assert "`tool_result` blocks must come first" in error_of(response)["message"]


def test_mock_accepts_a_whole_tool_pair_and_answers_from_the_result(mock: TestClient) -> None:
    response = mock.post("/v1/messages", json=body(tool_turn()))
    assert response.status_code == 200
    assert response.json()["content"] == [{"type": "text", "text": "The tool said: 18C"}]


@pytest.mark.parametrize(
    ("signature_model", "text"),
    [("claude-sonnet-4-5", THINKING + " (edited)"), ("claude-haiku-4-5", THINKING)],
)
def test_mock_refuses_a_thinking_block_it_cannot_verify(
    mock: TestClient, signature_model: str, text: str
) -> None:
    thinking = {"type": "thinking", "thinking": text, "signature": signature_for(signature_model, THINKING)}
    response = mock.post("/v1/messages", json=body(tool_turn(thinking)))
    assert response.status_code == 400
    assert error_of(response)["message"] == "messages.1.content.0: Invalid `signature` in `thinking` block"


def test_mock_signs_its_thinking_and_accepts_it_back(mock: TestClient) -> None:
    thinking_on = {"thinking": {"type": "enabled", "budget_tokens": 1024}}
    first = mock.post(
        "/v1/messages", json=body([user("Weather?")], tools=[{"name": "get_weather"}], **thinking_on)
    )
    content = first.json()["content"]
    assert [block["type"] for block in content] == ["thinking", "tool_use"]
    result = {"type": "tool_result", "tool_use_id": content[1]["id"], "content": "18C"}
    history = [
        user("Weather?"),
        {"role": "assistant", "content": content},
        {"role": "user", "content": [result]},
    ]
    assert mock.post("/v1/messages", json=body(history, **thinking_on)).status_code == 200
    without = [history[0], {"role": "assistant", "content": content[1:]}, history[2]]
    refused = mock.post("/v1/messages", json=body(without, **thinking_on))
    assert refused.status_code == 400
    assert "a final `assistant` message must start with a thinking block" in error_of(refused)["message"]


def test_mock_reads_and_writes_its_cache_per_breakpoint(mock: TestClient) -> None:
    system = [{"type": "text", "text": LONG, "cache_control": {"type": "ephemeral"}}]
    first = mock.post("/v1/messages", json=body([user("one")], system=system)).json()["usage"]
    assert first["cache_read_input_tokens"] == 0
    assert first["cache_creation_input_tokens"] > 1024
    assert first["cache_creation"]["ephemeral_5m_input_tokens"] == first["cache_creation_input_tokens"]
    again = mock.post("/v1/messages", json=body([user("two")], system=system)).json()["usage"]
    assert again["cache_read_input_tokens"] == first["cache_creation_input_tokens"]
    assert again["cache_creation_input_tokens"] == 0
    assert again["input_tokens"] == first["input_tokens"]  # input_tokens exclude reads and writes
    hour = [{**system[0], "cache_control": {"type": "ephemeral", "ttl": "1h"}}]
    turn = [
        user("one"),
        {"role": "assistant", "content": "echo"},
        user(LONG, cache_control={"type": "ephemeral"}),
    ]
    grown = mock.post("/v1/messages", json=body(turn, system=hour)).json()["usage"]
    assert grown["cache_read_input_tokens"] == first["cache_creation_input_tokens"]  # the system prefix
    assert grown["cache_creation"]["ephemeral_5m_input_tokens"] > 1000  # the new turn, written
    assert grown["cache_creation"]["ephemeral_1h_input_tokens"] == 0
    counted = mock.post(
        "/v1/messages/count_tokens", json={"model": "claude-sonnet-4-5", "messages": turn, "system": hour}
    )
    total = grown["input_tokens"] + grown["cache_read_input_tokens"] + grown["cache_creation_input_tokens"]
    assert counted.json() == {"input_tokens": total}


def test_mock_refuses_a_fifth_breakpoint(mock: TestClient) -> None:
    marked = [user(f"part {n}", cache_control={"type": "ephemeral"}) for n in range(5)]
    response = mock.post("/v1/messages", json=body(marked))
    assert response.status_code == 400
    assert (
        error_of(response)["message"] == "A maximum of 4 blocks with cache_control may be provided. Found 5."
    )


def test_mock_count_tokens_refuses_create_only_fields(mock: TestClient) -> None:
    response = mock.post("/v1/messages/count_tokens", json=body([user("hi")]))
    assert response.status_code == 400
    assert error_of(response)["message"] == "max_tokens: Extra inputs are not permitted"


def test_mock_wants_the_providers_key_alone(mock: TestClient) -> None:
    assert (
        mock.post("/v1/messages", json=body([user("hi")]), headers={"x-api-key": "sk-tenant"}).status_code
        == 401
    )
    bearer = mock.post(
        "/v1/messages", json=body([user("hi")]), headers={"authorization": "Bearer sk-upstream"}
    )
    assert bearer.status_code == 401 and error_of(bearer)["type"] == "authentication_error"


def test_mock_fails_as_told_in_anthropics_shape(mock: TestClient) -> None:
    mock.post("/_control", json={"fail_next": 1, "fail_status": 529})
    failed = mock.post("/v1/messages", json=body([user("hi")]))
    assert failed.status_code == 529 and error_of(failed)["type"] == "overloaded_error"
    assert mock.post("/v1/messages", json=body([user("hi")])).status_code == 200


def test_mock_streams_and_can_end_in_an_error_event(mock: TestClient) -> None:
    stream = mock.post("/v1/messages", json=body([user("hi")], stream=True))
    kinds = [orjson.loads(line[5:])["type"] for line in stream.text.splitlines() if line.startswith("data:")]
    assert kinds[0] == "message_start" and kinds[-2:] == ["message_delta", "message_stop"]
    mock.post("/_control", json={"anthropic_stream_error": "overloaded_error"})
    broken = mock.post("/v1/messages", json=body([user("hi")], stream=True))
    kinds = [orjson.loads(line[5:])["type"] for line in broken.text.splitlines() if line.startswith("data:")]
    assert kinds[-1] == "error" and "message_stop" not in kinds
