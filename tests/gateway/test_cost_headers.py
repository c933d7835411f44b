"""Every answer tells its caller what it cost: ``x-gateway-cost-usd`` and ``x-gateway-saving-usd`` (with
its basis) on chat, Responses, Messages and embeddings, exact for whole answers (the ledger's own figure)
and marked estimated on a stream, whose headers leave before its usage; the stream's event that brings the
usage carries the exact figure in it (``x_gateway_cost_usd``, ...), its other bytes relayed unchanged."""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import respx
from starlette.testclient import TestClient

from tests.factories import ADMIN_KEY, TENANT_KEY, chat_body, gateway_client, make_config
from tests.gateway.test_messages_pipeline import CLAUDE, Upstream, config, create_body
from tests.mock.responses import response_events, responses_answer, sse

UPSTREAM = "http://upstream.test/v1"
CHAT_USAGE = {
    "prompt_tokens": 1_000,
    "completion_tokens": 20,
    "prompt_tokens_details": {"cached_tokens": 400},
}


@pytest.fixture
def tenant() -> str:
    return f"costs-{uuid.uuid4().hex[:10]}"  # the Redis is shared: a tenant per test


def streamed(payload: bytes, piece: int = 53) -> httpx.Response:
    async def pieces() -> AsyncIterator[bytes]:
        for start in range(0, len(payload), piece):
            yield payload[start : start + piece]

    return httpx.Response(200, content=pieces(), headers={"content-type": "text/event-stream"})


def stream_usages(content: bytes) -> list[dict[str, Any]]:
    """The usage objects of a stream's events (chat chunks, Messages events, Responses' responses)."""
    found = []
    for line in content.splitlines():
        if not line.startswith(b"data:") or line.strip() == b"data: [DONE]":
            continue
        data = orjson.loads(line[5:])
        usage = data.get("usage") or (data.get("response") or {}).get("usage")
        if isinstance(usage, dict):
            found.append(usage)
    return found


def told_cost(answer: httpx.Response) -> int:
    """What an answer told its caller it cost, in nano-dollars: a whole answer in its header, exact; a
    stream in the usage of the event that brought it (its header, sent before, is an estimate)."""
    if not answer.headers["content-type"].startswith("text/event-stream"):
        assert "x-gateway-cost-estimated" not in answer.headers
        return int(Decimal(answer.headers["x-gateway-cost-usd"]) * 10**9)
    assert answer.headers["x-gateway-cost-estimated"] == "true"
    [usage] = [usage for usage in stream_usages(answer.content) if "x_gateway_cost_usd" in usage]
    assert "x_gateway_cost_estimated" not in usage
    return int(Decimal(usage["x_gateway_cost_usd"]) * 10**9)


def chat_reply(request: httpx.Request) -> httpx.Response:
    body = orjson.loads(request.content)
    choice = {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
    reply = {"id": "c1", "object": "chat.completion", "model": body["model"], "choices": [choice]}
    if not body.get("stream"):
        return httpx.Response(200, json={**reply, "usage": CHAT_USAGE})
    chunk = {"id": "c1", "object": "chat.completion.chunk", "model": body["model"]}
    lines = [
        {**chunk, "choices": [{"index": 0, "delta": {"content": "ok"}, "finish_reason": "stop"}]},
        {**chunk, "choices": [], "usage": CHAT_USAGE},
    ]
    payload = b"".join(b"data: " + orjson.dumps(line) + b"\n\n" for line in lines) + b"data: [DONE]\n\n"

    async def pieces() -> AsyncIterator[bytes]:
        yield payload

    return httpx.Response(200, content=pieces(), headers={"content-type": "text/event-stream"})


def responses_reply(request: httpx.Request) -> httpx.Response:
    return httpx.Response(
        200, json=responses_answer(orjson.loads(request.content), number=1, usage=(900, 300))
    )


def embeddings_reply(request: httpx.Request) -> httpx.Response:
    data = [{"object": "embedding", "index": 0, "embedding": [0.1, 0.2]}]
    return httpx.Response(200, json={"object": "list", "data": data, "usage": {"prompt_tokens": 7}})


def ledger_costs(client: TestClient, tenant: str, count: int) -> dict[str, int]:
    """The tenant's cost events by id, in nano-dollars, once there are ``count``."""
    deadline = time.monotonic() + 10
    while True:
        answer = client.get(
            "/admin/costs",
            params={"tenant": tenant, "format": "ndjson"},
            headers={"authorization": f"Bearer {ADMIN_KEY}"},
        )
        found = [orjson.loads(line) for line in answer.text.splitlines() if line.strip()]
        if len(found) >= count or time.monotonic() > deadline:
            return {event["id"]: int(Decimal(event["cost_usd"]) * 10**9) for event in found}
        time.sleep(0.05)


def settings_for(tenant: str) -> dict[str, Any]:
    settings = config(tenant)
    settings["models"]["text-embedding-3-small"]["pricing"] = {"input": "0.02", "output": "0"}
    return settings


def test_every_front_answers_with_its_cost_and_saving_the_ledger_records(
    tmp_path: Path, redis_url: str, tenant: str
) -> None:
    router = respx.Router(assert_all_called=False)
    router.post(f"{UPSTREAM}/chat/completions").mock(side_effect=chat_reply)
    router.post(f"{UPSTREAM}/responses").mock(side_effect=responses_reply)
    router.post(f"{UPSTREAM}/embeddings").mock(side_effect=embeddings_reply)
    router.post(f"{CLAUDE}/messages").mock(side_effect=Upstream().messages)
    with gateway_client(tmp_path, redis_url, router, config=settings_for(tenant)) as client:
        answers = [
            client.post("/v1/chat/completions", json=chat_body()),
            client.post("/v1/responses", json={"model": "gpt-5.4", "input": "Hello there"}),
            client.post("/v1/messages", json=create_body(), headers={"x-api-key": TENANT_KEY}),
            client.post("/v1/embeddings", json={"model": "text-embedding-3-small", "input": "Hello"}),
        ]
        costs = ledger_costs(client, tenant, len(answers))
    for answer in answers:
        assert answer.status_code == 200, answer.text
        headers = answer.headers
        recorded = costs[headers["x-gateway-request-id"]]
        assert recorded > 0
        assert Decimal(headers["x-gateway-cost-usd"]) * 10**9 == recorded, answer.url
        # forwarded unchanged: nothing saved, nothing lost
        assert (headers["x-gateway-saving-usd"], headers["x-gateway-saving-basis"]) == ("0.00", "forwarded")
        assert "x-gateway-cost-estimated" not in headers
    # the chat's figure is its usage at gpt-5.4's prices: 600 uncached, 400 cached, 20 out
    assert Decimal(answers[0].headers["x-gateway-cost-usd"]) == Decimal("0.0019")


def test_a_stream_says_its_cost_is_an_estimate_of_what_it_sent(tmp_path: Path, redis_url: str) -> None:
    router = respx.Router(assert_all_called=False)
    router.post(f"{UPSTREAM}/chat/completions").mock(side_effect=chat_reply)
    with gateway_client(tmp_path, redis_url, router, config=make_config()) as client:
        with client.stream("POST", "/v1/chat/completions", json=chat_body(stream=True)) as answer:
            body = b"".join(answer.iter_bytes())
    assert answer.status_code == 200 and b"[DONE]" in body
    headers = answer.headers
    assert headers["x-gateway-cost-estimated"] == "true"
    sent = int(headers["x-gateway-prompt-tokens"])
    # the input it sent at the uncached price: no output or cache known when the headers leave
    assert Decimal(headers["x-gateway-cost-usd"]) == Decimal(sent) * Decimal("2.50") / 10**6


def responses_stream_reply(request: httpx.Request) -> httpx.Response:
    answer = responses_answer(orjson.loads(request.content), number=1, usage=(900, 300))
    return streamed(sse(response_events(answer)))


def without_cost(content: bytes) -> bytes:
    """A stream's bytes with the gateway's fields taken out of its usage again (as the upstream sent it)."""
    events = []
    for event in content.split(b"\n\n"):
        lines = event.split(b"\n")
        for n, line in enumerate(lines):
            if line.startswith(b"data: {") and b"x_gateway_" in line:
                data = orjson.loads(line[5:])
                holder = data if "usage" in data else data["response"]
                holder["usage"] = {k: v for k, v in holder["usage"].items() if not k.startswith("x_gateway_")}
                lines[n] = b"data: " + orjson.dumps(data)
        events.append(b"\n".join(lines))
    return b"\n\n".join(events)


def test_every_front_ends_its_stream_with_the_cost_the_ledger_records(
    tmp_path: Path, redis_url: str, tenant: str
) -> None:
    upstream: dict[str, bytes] = {}

    def kept(reply: httpx.Response, front: str) -> httpx.Response:
        upstream[front] = b""

        async def relayed() -> AsyncIterator[bytes]:
            async for piece in reply.aiter_raw():
                upstream[front] += piece
                yield piece

        return httpx.Response(200, content=relayed(), headers={"content-type": "text/event-stream"})

    router = respx.Router(assert_all_called=False)
    router.post(f"{UPSTREAM}/chat/completions").mock(side_effect=lambda r: kept(chat_reply(r), "chat"))
    router.post(f"{UPSTREAM}/responses").mock(
        side_effect=lambda r: kept(responses_stream_reply(r), "responses")
    )
    router.post(f"{CLAUDE}/messages").mock(side_effect=lambda r: kept(Upstream().messages(r), "messages"))
    with gateway_client(tmp_path, redis_url, router, config=settings_for(tenant)) as client:
        answers = {
            "chat": client.post(
                "/v1/chat/completions", json=chat_body(stream=True, stream_options={"include_usage": True})
            ),
            "responses": client.post(
                "/v1/responses", json={"model": "gpt-5.4", "input": "Hi", "stream": True}
            ),
            "messages": client.post(
                "/v1/messages", json=create_body(stream=True), headers={"x-api-key": TENANT_KEY}
            ),
        }
        costs = ledger_costs(client, tenant, len(answers))
    for front, answer in answers.items():
        assert answer.status_code == 200, answer.text
        assert told_cost(answer) == costs[answer.headers["x-gateway-request-id"]] > 0, front
        [usage] = [usage for usage in stream_usages(answer.content) if "x_gateway_cost_usd" in usage]
        assert (usage["x_gateway_saving_usd"], usage["x_gateway_saving_basis"]) == ("0.00", "forwarded")
        # only that event changed: the rest is the upstream's stream, byte for byte
        assert without_cost(answer.content) == upstream[front], front
