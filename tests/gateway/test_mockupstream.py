"""The built-in mock upstream (``gateway.mockupstream``): its answers in each API's shapes, with usage the
gateway's counter agrees with, and what its start prints."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest
from starlette.testclient import TestClient

from compressors.summary.prompt import build_prompt, missing_sections
from gateway.config.schema.counting import CountingConfig
from gateway.config.schema.root import GatewayConfig
from gateway.mockupstream.app import create_mock_app
from gateway.mockupstream.server import (
    BASE_URL_VARIABLES,
    KEY_VARIABLES,
    PLACEHOLDER_KEY,
    MockUpstream,
    try_lines,
)
from gateway.tokens.counter import TokenCounter

HELLO = [{"role": "user", "content": "Hello"}]
KEY = "sk-gw-try-me"


@pytest.fixture
def mock() -> Iterator[TestClient]:
    with TestClient(create_mock_app()) as client:
        yield client


def events(response: httpx.Response) -> list[dict[str, Any]]:
    return [
        orjson.loads(line.removeprefix("data: "))
        for line in response.text.splitlines()
        if line.startswith("data: ") and line != "data: [DONE]"
    ]


def test_mockupstream_chat_answers_with_the_gateways_count(mock: TestClient) -> None:
    body = {"model": "gpt-5.4", "messages": HELLO}
    answer = mock.post("/v1/chat/completions", json=body).json()
    assert answer["choices"][0]["message"]["content"] == (
        'This is the mock upstream answering as gpt-5.4. You said: "Hello"'
    )
    counted = TokenCounter.build(CountingConfig(), {}).count_chat("gpt-5.4", body).total
    assert answer["usage"]["prompt_tokens"] == counted
    assert answer["usage"]["total_tokens"] == counted + answer["usage"]["completion_tokens"]


def test_mockupstream_chat_is_deterministic(mock: TestClient) -> None:
    body = {"model": "gpt-5.4", "messages": HELLO}
    first, second = (mock.post("/v1/chat/completions", json=body).json() for _ in range(2))
    assert first["choices"] == second["choices"] and first["usage"] == second["usage"]
    assert first["id"] != second["id"]  # answers, like a provider's, have ids of their own


def test_mockupstream_chat_stream_ends_with_usage_when_asked(mock: TestClient) -> None:
    body = {"model": "gpt-5.4", "messages": HELLO, "stream": True, "stream_options": {"include_usage": True}}
    response = mock.post("/v1/chat/completions", json=body)
    assert response.headers["content-type"].startswith("text/event-stream")
    assert response.text.endswith("data: [DONE]\n\n")
    chunks = events(response)
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    whole = mock.post("/v1/chat/completions", json={**body, "stream": False}).json()
    assert text == whole["choices"][0]["message"]["content"]
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"] == whole["usage"]
    assert [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]][-1] == "stop"


def test_mockupstream_answer_keeps_to_its_cap(mock: TestClient) -> None:
    body = {"model": "gpt-5.4", "messages": HELLO, "max_completion_tokens": 3}
    answer = mock.post("/v1/chat/completions", json=body).json()
    assert answer["usage"]["completion_tokens"] <= 3
    assert answer["choices"][0]["finish_reason"] == "length"


def test_mockupstream_answers_the_gateways_summary_calls_with_its_headings(mock: TestClient) -> None:
    prompt = build_prompt(summaries=[], transcript="user: hello\nassistant: hi")
    chat = mock.post("/v1/chat/completions", json={"model": "gpt-5.4-mini", "messages": prompt}).json()
    assert missing_sections(chat["choices"][0]["message"]["content"]) == []
    system, turns = prompt[0]["content"], prompt[1:]
    body = {"model": "claude-haiku-4-5", "max_tokens": 4000, "system": system, "messages": turns}
    message = mock.post("/v1/messages", json=body).json()
    assert missing_sections(message["content"][0]["text"]) == []


def test_mockupstream_responses_stream_ends_with_the_whole_response(mock: TestClient) -> None:
    body = {"model": "gpt-5.4", "input": "Hi there", "stream": True}
    response = mock.post("/v1/responses", json=body)
    kinds = [
        line.removeprefix("event: ") for line in response.text.splitlines() if line.startswith("event: ")
    ]
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    final = events(response)[-1]["response"]
    whole = mock.post("/v1/responses", json={**body, "stream": False}).json()
    assert final["output"][0]["content"] == whole["output"][0]["content"]
    assert final["usage"] == whole["usage"] and whole["usage"]["input_tokens"] > 0
    deltas = "".join(e["delta"] for e in events(response) if e["type"] == "response.output_text.delta")
    assert deltas == whole["output"][0]["content"][0]["text"]
    assert [e["sequence_number"] for e in events(response)] == list(range(len(kinds)))


def test_mockupstream_counts_responses_input_as_input_tokens_says(mock: TestClient) -> None:
    body = {"model": "gpt-5.4", "instructions": "Be brief.", "input": [{"role": "user", "content": "Hi"}]}
    counted = mock.post("/v1/responses/input_tokens", json=body).json()
    assert counted["object"] == "response.input_tokens"
    assert counted["input_tokens"] == mock.post("/v1/responses", json=body).json()["usage"]["input_tokens"]


def test_mockupstream_messages_stream_carries_usage_in_message_delta(mock: TestClient) -> None:
    body = {"model": "claude-sonnet-4-5", "max_tokens": 100, "messages": HELLO, "stream": True}
    stream = events(mock.post("/v1/messages", json=body))
    assert [e["type"] for e in stream][:2] == ["message_start", "content_block_start"]
    assert stream[-1]["type"] == "message_stop"
    whole = mock.post("/v1/messages", json={**body, "stream": False}).json()
    assert stream[-2]["type"] == "message_delta" and stream[-2]["usage"] == whole["usage"]
    count = mock.post("/v1/messages/count_tokens", json=body).json()
    assert count == {"input_tokens": whole["usage"]["input_tokens"]}


def test_mockupstream_embeddings_are_the_same_for_the_same_text(mock: TestClient) -> None:
    body = {"model": "text-embedding-3-small", "input": ["a", "b", "a"]}
    data = mock.post("/v1/embeddings", json=body).json()["data"]
    assert data[0]["embedding"] == data[2]["embedding"] != data[1]["embedding"]


@pytest.mark.parametrize(
    ("path", "body", "status", "shape"),
    [
        ("/v1/chat/completions", b"{", 400, "error"),
        ("/v1/messages", b"[]", 400, "type"),
        ("/v1/audio/speech", b"{}", 404, "error"),
    ],
)
def test_mockupstream_refuses_like_a_provider(
    mock: TestClient, path: str, body: bytes, status: int, shape: str
) -> None:
    response = mock.post(path, content=body)
    assert response.status_code == status
    assert shape in response.json()


def config(providers: dict[str, Any], models: dict[str, Any], key: str = KEY) -> GatewayConfig:
    return GatewayConfig.model_validate(
        {"providers": providers, "models": models, "tenants": {"default": {"keys": [key]}}}
    )


OPENAI = {"openai": {"base_url": "http://127.0.0.1:1/v1", "api_key": PLACEHOLDER_KEY}}
GPT = {
    "text-embedding-3-small": {"provider": "openai", "kind": "embedding"},
    "gpt-5.4": {"provider": "openai"},
}


class Stopped:
    """What ``try_lines`` reads of a mock: its address (nothing is served)."""

    base_url = "http://127.0.0.1:1/v1"


def lines(cfg: GatewayConfig, host: str = "127.0.0.1") -> list[str]:
    return try_lines(cfg, Stopped(), KEY, host=host, port=8080)  # type: ignore[arg-type]


def test_mockupstream_start_prints_the_tenant_key_and_a_request_for_the_first_chat_model() -> None:
    said = lines(config(OPENAI, GPT))
    assert f"gateway: tenant default's key (DEFAULT_TENANT_KEY): {KEY}" in said
    curl = next(line for line in said if "curl" in line)
    assert curl.startswith("  curl -s http://127.0.0.1:8080/v1/chat/completions")
    assert f"Bearer {KEY}" in curl and '"model": "gpt-5.4"' in curl
    assert not any("warning" in line for line in said)


def test_mockupstream_start_calls_a_wildcard_address_locally() -> None:
    said = lines(config(OPENAI, GPT), host="0.0.0.0")
    assert any("curl -s http://127.0.0.1:8080/" in line for line in said)


def test_mockupstream_start_asks_messages_of_a_claude_only_config() -> None:
    anthropic = {"anthropic": {"base_url": "http://127.0.0.1:1/v1", "kind": "anthropic"}}
    said = lines(config(anthropic, {"claude-sonnet-4-5": {"provider": "anthropic"}}))
    curl = next(line for line in said if "curl" in line)
    assert "/v1/messages" in curl and f"x-api-key: {KEY}" in curl and "max_tokens" in curl


def test_mockupstream_start_says_when_no_tenant_has_the_key() -> None:
    said = lines(config(OPENAI, GPT, key="sha256:" + "0" * 64))
    assert any("no tenant of the config has the key" in line for line in said)
    assert not any("curl" in line or KEY in line for line in said)


def test_mockupstream_start_warns_of_a_provider_it_does_not_stand_in_for() -> None:
    elsewhere = {**OPENAI, "azure": {"base_url": "https://example.openai.azure.com/v1"}}
    said = lines(config(elsewhere, GPT))
    assert "gateway: warning: provider azure still calls https://example.openai.azure.com/v1" in " ".join(
        said
    )


def test_mockupstream_serves_and_points_the_provider_variables_at_itself(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in (*BASE_URL_VARIABLES, *KEY_VARIABLES):
        monkeypatch.setenv(name, "from-the-shell")  # restored after the test
    mock = MockUpstream.start()
    try:
        for name in BASE_URL_VARIABLES:
            assert httpx.get(f"{os.environ[name]}/models", timeout=5).status_code == 200
        assert {os.environ[name] for name in KEY_VARIABLES} == {PLACEHOLDER_KEY}
    finally:
        mock.stop()
    assert not mock.thread.is_alive()
