"""Experiments on the Messages front: a shadow copy goes to an Anthropic candidate without the thinking
blocks only the primary can verify, is compared by its tool use, and billed to the experiment; a split
keeps a conversation on one Claude model. The upstream is the mock's Anthropic logic behind respx."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import respx

from gateway.experiments.split import conversation_key
from gateway.fronts.messages.front import MESSAGES
from gateway.sampling.decide import sample_fraction
from tests.factories import TENANT_KEY, gateway_client
from tests.gateway.test_experiments_shadow import ledger, pairs_of, wait_for
from tests.gateway.test_messages_pipeline import CLAUDE, config
from tests.mock.anthropic import THINKING, Refused, check, message, message_events, signature_for, sse

pytestmark = pytest.mark.usefixtures("experiments_flush_often")

HEADERS = {"authorization": "", "x-api-key": TENANT_KEY, "anthropic-version": "2023-06-01"}
USAGE = {"input_tokens": 30}


@pytest.fixture
def router() -> respx.Router:
    return respx.Router(assert_all_called=False)


class Claude:
    """Anthropic's answers (the mock's), refusing what Anthropic refuses; remembers what it received."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = orjson.loads(request.content)
        self.bodies.append(body)
        try:
            check(body)
        except Refused as refused:
            return httpx.Response(
                refused.status, json={"type": "error", "error": {"message": refused.message}}
            )
        reply = message(body, len(self.bodies), USAGE)
        if not body.get("stream"):
            return httpx.Response(200, json=reply)
        payload = sse(message_events(reply))

        async def pieces() -> AsyncIterator[bytes]:
            for start in range(0, len(payload), 64):
                yield payload[start : start + 64]

        return httpx.Response(200, content=pieces(), headers={"content-type": "text/event-stream"})


def with_experiment(tenant: str, name: str, **experiment: Any) -> dict[str, Any]:
    base = config(tenant)
    base["experiments"] = {
        name: {
            "primary": ["claude-sonnet-4-5"],
            "candidate": "claude-haiku-4-5",
            "sample_rate": 1.0,
            "budget_usd_per_day": 5,
            **experiment,
        }
    }
    return base


def thinking_conversation() -> list[dict[str, Any]]:
    signed = {
        "type": "thinking",
        "thinking": THINKING,
        "signature": signature_for("claude-sonnet-4-5", THINKING),
    }
    return [
        {"role": "user", "content": [{"type": "text", "text": "What is the weather?"}]},
        {
            "role": "assistant",
            "content": [signed, {"type": "text", "text": "Let me think about where you are."}],
        },
        {"role": "user", "content": [{"type": "text", "text": "In Paris."}]},
    ]


def test_a_streamed_messages_request_is_shadowed_without_its_thinking_and_compared_by_tool_use(
    tmp_path: Path, redis_url: str, router: respx.Router
) -> None:
    tenant, name = f"t-{uuid.uuid4().hex[:8]}", f"claude-{uuid.uuid4().hex[:8]}"
    claude = Claude()
    route = router.post(f"{CLAUDE}/messages").mock(side_effect=claude)
    tools = [{"name": "weather", "description": "The weather", "input_schema": {"type": "object"}}]
    body = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 512,
        "stream": True,
        "thinking": {"type": "enabled", "budget_tokens": 1024},
        "tools": tools,
        "messages": thinking_conversation(),
    }
    with gateway_client(
        tmp_path, redis_url, router, config=with_experiment(tenant, name, mode="shadow")
    ) as client:
        with client.stream("POST", "/v1/messages?beta=true", json=body, headers=HEADERS) as response:
            relayed = b"".join(response.iter_bytes())
            request_id = response.headers["x-gateway-request-id"]
        [pair] = wait_for(lambda: pairs_of(redis_url, name))
        events = wait_for(lambda: ledger(redis_url, f"experiment:{name}"))
    assert response.status_code == 200 and b"message_stop" in relayed
    assert [call.request.url.query for call in route.calls] == [b"beta=true", b"beta=true"]
    primary, candidate = claude.bodies
    assert primary["model"] == "claude-sonnet-4-5" and candidate["model"] == "claude-haiku-4-5"
    assert any(block["type"] == "thinking" for block in primary["messages"][1]["content"])
    assert not any(block["type"] == "thinking" for block in candidate["messages"][1]["content"])
    assert pair["agreement"] == {
        "kind": "tool",
        "score": 1.0,
        "method": "tool",
        "same_tool": True,
        "same_args": True,
    }
    assert pair["candidate"]["finish_reason"] == "tool_calls" and pair["candidate"]["ttft_ms"] is not None
    assert pair["candidate"]["error"] is None
    [event] = events
    assert (event.action, event.model, event.parent_id) == ("shadow", "claude-haiku-4-5", request_id)
    assert event.input_tokens == 30 and event.cost_nanos > 0


def test_a_split_keeps_each_claude_conversation_on_one_model(
    tmp_path: Path, redis_url: str, router: respx.Router
) -> None:
    tenant, name = f"t-{uuid.uuid4().hex[:8]}", f"split-{uuid.uuid4().hex[:8]}"
    claude = Claude()
    router.post(f"{CLAUDE}/messages").mock(side_effect=claude)
    models: dict[int, set[str]] = {}
    expected: dict[int, str] = {}
    for number in range(1_000):  # five conversations the split sends each way (the names are random)
        opening = {"model": "claude-sonnet-4-5", "messages": [opening_message(number, name)]}
        conversation = conversation_key(tenant, opening, MESSAGES.messages(opening))
        to_candidate = sample_fraction(f"{name}\x00{conversation}") < 0.5
        model = "claude-haiku-4-5" if to_candidate else "claude-sonnet-4-5"
        if list(expected.values()).count(model) < 5:
            expected[number] = model
        if len(expected) == 10:
            break
    with gateway_client(
        tmp_path, redis_url, router, config=with_experiment(tenant, name, mode="split", sample_rate=0.5)
    ) as client:
        for number in expected:
            messages: list[dict[str, Any]] = [opening_message(number, name)]
            for turn in range(2):
                body = {"model": "claude-sonnet-4-5", "max_tokens": 64, "messages": messages}
                response = client.post("/v1/messages", json=body, headers=HEADERS)
                assert response.status_code == 200, response.text
                model = response.headers["x-gateway-model"]
                arm = "candidate" if model == "claude-haiku-4-5" else "primary"
                assert response.headers["x-gateway-experiment"] == f"{name}; arm={arm}"
                models.setdefault(number, set()).add(model)
                answer = {"role": "assistant", "content": response.json()["content"]}
                messages = [*messages, answer, {"role": "user", "content": f"turn {turn}"}]
    assert models == {number: {model} for number, model in expected.items()}  # each kept on its arm


def opening_message(number: int, name: str) -> dict[str, Any]:
    return {"role": "user", "content": f"conversation {number} of {name}"}


def test_an_experiment_whose_candidate_speaks_another_api_leaves_messages_alone(
    tmp_path: Path, redis_url: str, router: respx.Router
) -> None:
    tenant, name = f"t-{uuid.uuid4().hex[:8]}", f"cross-{uuid.uuid4().hex[:8]}"
    claude = Claude()
    router.post(f"{CLAUDE}/messages").mock(side_effect=claude)
    base = with_experiment(tenant, name, mode="split", candidate="gpt-5.2")
    with gateway_client(tmp_path, redis_url, router, config=base) as client:
        response = client.post(
            "/v1/messages",
            json={
                "model": "claude-sonnet-4-5",
                "max_tokens": 64,
                "messages": [{"role": "user", "content": "hi"}],
            },
            headers=HEADERS,
        )
    assert response.status_code == 200
    assert response.headers["x-gateway-model"] == "claude-sonnet-4-5"
    assert "x-gateway-experiment" not in response.headers
