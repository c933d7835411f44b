"""A Claude-only shop's cheap model: the summary of a compacted Messages request is written by a model of a
``kind: anthropic`` provider, called on ``POST /messages`` with the provider's key, ``max_tokens`` and the
prompt's system message as ``system``; its usage, read Anthropic's way, is priced as a side call."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import orjson
import respx

from gateway.upstream.summary_completer import messages_body
from tests.factories import gateway_client
from tests.gateway.test_messages_front import SUMMARY, agent_session
from tests.gateway.test_messages_pipeline import ANTHROPIC_HEADERS, CLAUDE, Upstream, config, events, tenant

__all__ = ["tenant"]  # the fixture, shared

CHEAP = "claude-haiku-4-5"
CHEAP_USAGE = {
    "input_tokens": 3_000,
    "cache_read_input_tokens": 1_000,
    "cache_creation_input_tokens": 0,
    "output_tokens": 100,
}


class ClaudeOnly:
    """The Anthropic provider: the cheap model answers the summary, the requested one like the mock."""

    def __init__(self) -> None:
        self.main = Upstream()
        self.cheap: list[httpx.Request] = []

    def messages(self, request: httpx.Request) -> httpx.Response:
        body = orjson.loads(request.content)
        if body["model"] != CHEAP:
            return self.main.messages(request)
        self.cheap.append(request)
        reply = {
            "id": f"msg_cheap_{len(self.cheap)}",
            "type": "message",
            "role": "assistant",
            "model": CHEAP,
            "content": [{"type": "text", "text": SUMMARY}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": CHEAP_USAGE,
        }
        return httpx.Response(200, json=reply)


def claude_only_config(tenant: str) -> dict[str, Any]:
    settings = config(tenant)
    settings["models"] = {
        name: model for name, model in settings["models"].items() if name.startswith("claude")
    }
    settings["policies"] = {
        "bands": {"claude-sonnet-*": {"warning_tokens": 10_000, "cliff_tokens": 100_000}},
        "default": {
            "name": "default",
            "compress": {"cheap_model": CHEAP, "timing": "eager", "keep_recent_turns": 1},
        },
    }
    return settings


def test_a_messages_only_cheap_model_writes_the_summary_priced_as_a_side_call(
    tmp_path: Path, redis_url: str, tenant: str
) -> None:
    upstream = ClaudeOnly()
    router = respx.Router(assert_all_called=False)
    router.post(f"{CLAUDE}/messages").mock(side_effect=upstream.messages)
    chat = router.post(url__regex=r".*/chat/completions").mock(return_value=httpx.Response(404))
    request = agent_session(14)
    with gateway_client(tmp_path, redis_url, router, config=claude_only_config(tenant)) as client:
        response = client.post("/v1/messages", json=request, headers=ANTHROPIC_HEADERS)
        assert response.status_code == 200, response.text
        found = events(client, tenant, 1 + len(upstream.cheap))
    assert response.headers["x-gateway-action"] == "compress"
    assert upstream.cheap and not chat.called
    sent = upstream.cheap[0]
    assert sent.headers["x-api-key"] == "sk-ant-provider" and "authorization" not in sent.headers
    assert sent.headers["anthropic-version"] == "2023-06-01"
    body = orjson.loads(sent.content)
    assert body["model"] == CHEAP and isinstance(body["max_tokens"], int) and body["max_tokens"] > 0
    assert isinstance(body["system"], str) and body["system"]
    assert {turn["role"] for turn in body["messages"]} <= {"user", "assistant"}
    assert all(isinstance(turn["content"], str) and turn["content"] for turn in body["messages"])
    main = orjson.loads(router.calls.last.request.content)
    assert main["model"] == "claude-sonnet-4-5"
    assert SUMMARY in main["messages"][0]["content"][0]["text"]  # the summary is used
    summaries = [event for event in found if event["action"] == "summary"]
    assert len(summaries) == len(upstream.cheap)
    [first, *_] = summaries
    assert (first["model"], first["provider"]) == (CHEAP, "claude")
    assert (first["input_tokens"], first["cached_tokens"], first["output_tokens"]) == (4_000, 1_000, 100)
    # haiku: $1 / M input, $0.10 / M cached, $5 / M output
    assert Decimal(first["cost_usd"]) == Decimal("0.0036")


def test_a_chat_prompt_becomes_a_messages_body() -> None:
    prompt = [
        {"role": "system", "content": "Summarise."},
        {
            "role": "user",
            "content": [{"type": "text", "text": "part one, "}, {"type": "text", "text": "two"}],
        },
        {"role": "assistant", "content": "Noted."},
        {"role": "tool", "content": "output"},
    ]
    assert messages_body(prompt, max_tokens=300) == {
        "max_tokens": 300,
        "stream": False,
        "system": "Summarise.",
        "messages": [
            {"role": "user", "content": "part one, two"},
            {"role": "assistant", "content": "Noted."},
            {"role": "user", "content": "output"},
        ],
    }
    assert "system" not in messages_body([{"role": "user", "content": "hi"}], max_tokens=1)
