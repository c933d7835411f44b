"""Attack: spend past a hard budget through a call whose hold misses what it can cost.

Every call that can cost money takes a hold sized to its maximum: every choice of ``n``, embeddings, and
passthrough calls (which are metered like any other call).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import respx

from tests.factories import (
    TENANT_KEY,
    UPSTREAM,
    chat_body,
    completion,
    gateway_client,
    make_config,
)
from tests.security.conftest import app_events


def budgeted(tenant: str, daily_usd: str, **extra: Any) -> dict[str, Any]:
    config = make_config(
        tenants={tenant: {"keys": [TENANT_KEY], "budget": {"daily_usd": daily_usd, "hard": True}}}, **extra
    )
    config["models"]["text-embedding-3-small"]["pricing"] = {"input": "0.02", "output": "0"}
    return config


def test_the_hold_counts_every_choice_of_n(tmp_path: Path, redis_url: str, tenant_name: str) -> None:
    """$0.01 a day: one choice of at most 100 tokens fits, 64 of them ($0.096 of output) do not."""
    router = respx.Router()
    route = router.post(f"{UPSTREAM}/chat/completions").mock(
        return_value=httpx.Response(200, json=completion())
    )
    with gateway_client(tmp_path, redis_url, router, config=budgeted(tenant_name, "0.01")) as client:
        one = client.post("/v1/chat/completions", json=chat_body(max_tokens=100, n=1))
        many = client.post("/v1/chat/completions", json=chat_body(max_tokens=100, n=64))
    assert one.status_code == 200
    assert many.status_code == 429 and many.json()["error"]["code"] == "budget_exceeded"
    assert route.call_count == 1


def test_embeddings_take_a_hold(tmp_path: Path, redis_url: str, tenant_name: str) -> None:
    """100,000 bytes of input can be 100,000 tokens: $0.002, over a $0.001 budget."""
    router = respx.Router(assert_all_called=False)
    route = router.post(f"{UPSTREAM}/embeddings").mock(
        return_value=httpx.Response(200, json={"object": "list", "data": [], "usage": {"prompt_tokens": 1}})
    )
    body = {"model": "text-embedding-3-small", "input": "x " * 50_000}
    with gateway_client(tmp_path, redis_url, router, config=budgeted(tenant_name, "0.001")) as client:
        refused = client.post("/v1/embeddings", json=body)
        small = client.post("/v1/embeddings", json={**body, "input": "hello"})
    assert refused.status_code == 429 and refused.json()["error"]["code"] == "budget_exceeded"
    assert small.status_code == 200 and route.call_count == 1


def test_passthrough_calls_are_held_and_metered(tmp_path: Path, redis_url: str, tenant_name: str) -> None:
    router = respx.Router(assert_all_called=False)
    route = router.post(f"{UPSTREAM}/moderations").mock(return_value=httpx.Response(200, json={"id": "m"}))
    passthrough = [
        {"path": "/moderations", "price_usd": "0.0001"},
        {"path": "/images/generations", "hold_usd": "0.5"},
    ]
    config = budgeted(tenant_name, "0.01", passthrough=passthrough)
    with gateway_client(tmp_path, redis_url, router, config=config) as client:
        metered = client.post("/v1/moderations", json={"model": "gpt-5.2", "input": "x"})
        refused = client.post("/v1/images/generations", json={"model": "gpt-5.2", "prompt": "a cat"})
        request_id = metered.headers["x-gateway-request-id"]
        [event] = [e for e in app_events(client, tenant_name, until=request_id) if e["id"] == request_id]
    assert metered.status_code == 200 and route.call_count == 1
    assert event["cost_usd"] == "0.000100000" and event["model"] == "gpt-5.2"
    assert refused.status_code == 429 and refused.json()["error"]["code"] == "budget_exceeded"


def test_a_passthrough_call_refused_for_budget_writes_no_event(
    tmp_path: Path, redis_url: str, tenant_name: str
) -> None:
    """Like a refused chat or Responses request: nothing went upstream, so there is no cost event (the
    metered call after it is the one whose event is waited for; events are written in order)."""
    router = respx.Router(assert_all_called=False)
    route = router.post(f"{UPSTREAM}/moderations").mock(return_value=httpx.Response(200, json={"id": "m"}))
    passthrough = [{"path": "/moderations"}, {"path": "/images/generations", "hold_usd": "0.5"}]
    config = budgeted(tenant_name, "0.01", passthrough=passthrough)
    with gateway_client(tmp_path, redis_url, router, config=config) as client:
        refused = client.post("/v1/images/generations", json={"model": "gpt-5.2", "prompt": "a cat"})
        metered = client.post("/v1/moderations", json={"model": "gpt-5.2", "input": "x"})
        request_id = metered.headers["x-gateway-request-id"]
        stored = {event["id"] for event in app_events(client, tenant_name, until=request_id)}
    assert refused.status_code == 429 and route.call_count == 1
    assert refused.headers["x-gateway-request-id"] not in stored
