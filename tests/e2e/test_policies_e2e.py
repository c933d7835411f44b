"""The openai SDK sends requests of about 100K, 260K and 300K tokens through the gateway process; the
mock upstream process records what it actually received (it also plays the cheap summary model)."""

from __future__ import annotations

import httpx
import openai

from tests.fixtures.conversations import conversation_of, document_with_needle, tokens_of


def main_calls(mock: httpx.Client) -> list[dict[str, object]]:
    seen = mock.get("/_requests").json()["requests"]
    return [r["body"] for r in seen if r["path"] == "/v1/chat/completions" and not _summary(r["body"])]


def summary_calls(mock: httpx.Client) -> list[dict[str, object]]:
    seen = mock.get("/_requests").json()["requests"]
    return [r["body"] for r in seen if r["path"] == "/v1/chat/completions" and _summary(r["body"])]


def _summary(body: dict[str, object]) -> bool:
    messages = body.get("messages") or []
    assert isinstance(messages, list)
    return any(m.get("role") == "system" and "User goal" in str(m.get("content")) for m in messages)


def test_100k_is_forwarded_unchanged(client: openai.OpenAI, mock: httpx.Client) -> None:
    messages = conversation_of(100_000)
    raw = client.chat.completions.with_raw_response.create(model="gpt-5.4", messages=messages)
    assert raw.headers["x-gateway-action"] == "forward"
    assert raw.headers["x-gateway-prompt-tokens"] == str(tokens_of(messages))
    assert "x-gateway-warning" not in raw.headers
    assert main_calls(mock)[-1]["messages"] == messages


def test_260k_conversation_is_compressed(client: openai.OpenAI, mock: httpx.Client) -> None:
    messages = conversation_of(258_000)
    received = tokens_of(messages)
    assert 250_000 <= received <= 272_000
    raw = client.chat.completions.with_raw_response.create(model="gpt-5.4", messages=messages)
    assert raw.parse().choices[0].message.content
    assert raw.headers["x-gateway-action"] == "compress"
    assert raw.headers["x-gateway-prompt-tokens"] == str(received)
    assert "x-gateway-warning" in raw.headers
    sent = main_calls(mock)[-1]["messages"]
    assert isinstance(sent, list)
    assert tokens_of(sent) == int(raw.headers["x-gateway-forwarded-tokens"]) <= 150_000
    assert sent[0] == messages[0] and sent[-1] == messages[-1]
    assert any("Summary of the earlier conversation" in str(m["content"]) for m in sent)
    assert summary_calls(mock)


def test_300k_document_is_retrieved(client: openai.OpenAI, mock: httpx.Client) -> None:
    needle = "The secret code for the blue lighthouse is 4821-ALPHA."
    messages = [
        {"role": "user", "content": document_with_needle(4200, needle=needle, at=0.9)},
        {"role": "user", "content": "What is the secret code for the blue lighthouse?"},
    ]
    assert tokens_of(messages) > 272_000
    raw = client.chat.completions.with_raw_response.create(model="gpt-5.4", messages=messages)
    assert raw.headers["x-gateway-action"] == "retrieve"
    sent = main_calls(mock)[-1]["messages"]
    assert isinstance(sent, list)
    assert tokens_of(sent) == int(raw.headers["x-gateway-forwarded-tokens"]) <= 125_000
    assert needle in str(sent)
    assert sent[-1] == messages[-1]
