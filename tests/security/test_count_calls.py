"""Attack: use up the provider's shared counting quota, or the gateway's CPU, through free token counting.

``POST /v1/messages/count_tokens`` and ``POST /v1/responses/input_tokens`` are unbilled, so they are
limited per tenant (a fixed one-minute window in Redis, shared by every process), their bodies capped, and
refused to a tenant whose hard budget is spent; each call is counted in ``gateway_token_counts_total`` by
tenant.
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis.asyncio as aioredis
import respx

from gateway.base.errors import RateLimited
from gateway.core.count_limit import CountLimiter
from tests.factories import TENANT_KEY, UPSTREAM, chat_body, completion, gateway_client, make_config
from tests.gateway.test_metrics import scrape, value
from tests.security.conftest import app_events

CLAUDE = "https://api.anthropic.test/v1"
ANTHROPIC = {"authorization": "", "x-api-key": TENANT_KEY, "anthropic-version": "2023-06-01"}
COUNT_BODY = {"model": "claude-x", "messages": [{"role": "user", "content": "how many tokens is this?"}]}
INPUT_BODY = {"model": "gpt-5.4", "input": "how many tokens is this?"}


def config(tenant: str, *, limits: dict[str, Any] | None = None, **fields: Any) -> dict[str, Any]:
    base = make_config(tenants={tenant: {"keys": [TENANT_KEY], **fields}}, limits=limits or {})
    base["providers"]["mock"]["responses_input_tokens"] = True
    base["providers"]["claude"] = {
        "base_url": CLAUDE,
        "api_key": "sk-ant",
        "kind": "anthropic",
        "messages_count_tokens": True,
    }
    base["models"]["claude-x"] = {"provider": "claude", "context_window": 200_000}
    return base


def counting_upstream() -> tuple[respx.Router, respx.Route, respx.Route]:
    router = respx.Router(assert_all_called=False)
    messages = router.post(f"{CLAUDE}/messages/count_tokens").mock(
        return_value=httpx.Response(200, json={"input_tokens": 9})
    )
    responses = router.post(f"{UPSTREAM}/responses/input_tokens").mock(
        return_value=httpx.Response(200, json={"object": "response.input_tokens", "input_tokens": 9})
    )
    router.post(f"{UPSTREAM}/chat/completions").mock(
        return_value=httpx.Response(
            200,
            json=completion(usage={"prompt_tokens": 1_000_000, "completion_tokens": 1, "total_tokens": 1}),
        )
    )
    return router, messages, responses


def test_counting_calls_past_the_tenants_limit_get_429_with_retry_after(
    tmp_path: Path, redis_url: str, tenant_name: str
) -> None:
    """A limit of 2 a minute: of 5 calls (a window may end during the test, never two) at most 4 pass,
    and every call refused never reaches the provider."""
    router, messages, responses = counting_upstream()
    settings = config(tenant_name, token_counts_per_minute=2)
    with gateway_client(tmp_path, redis_url, router, config=settings) as client:
        counted = [
            client.post("/v1/messages/count_tokens", json=COUNT_BODY, headers=ANTHROPIC) for _ in range(5)
        ]
        asked = [client.post("/v1/responses/input_tokens", json=INPUT_BODY) for _ in range(3)]
        samples = scrape(client)
    refused = [answer for answer in counted if answer.status_code == 429]
    assert 1 <= len(refused) <= 3 and all(answer.status_code in (200, 429) for answer in counted)
    assert messages.call_count == 5 - len(refused)
    for answer in refused:
        assert answer.json()["type"] == "error" and answer.json()["error"]["type"] == "rate_limit_error"
        assert "limited to 2 calls a minute" in answer.json()["error"]["message"]
        assert 1 <= int(answer.headers["retry-after"]) <= 60
    limited = [answer for answer in asked if answer.status_code == 429]
    assert limited, "the window already holds this tenant's message counts"
    assert limited[0].json()["error"]["code"] == "rate_limit_exceeded" and "retry-after" in limited[0].headers
    assert responses.call_count == 3 - len(limited)
    labels = {"endpoint": "messages_count_tokens", "tenant": tenant_name}
    assert value(samples, "gateway_token_counts_total", status="429", **labels) == len(refused)
    assert value(samples, "gateway_token_counts_total", status="200", **labels) == 5 - len(refused)


@pytest.mark.parametrize(
    ("path", "body", "headers"),
    [("/v1/messages/count_tokens", COUNT_BODY, ANTHROPIC), ("/v1/responses/input_tokens", INPUT_BODY, {})],
)
def test_a_counting_body_over_its_cap_is_413_and_never_counted(
    tmp_path: Path, redis_url: str, tenant_name: str, path: str, body: dict[str, Any], headers: dict[str, str]
) -> None:
    router, messages, responses = counting_upstream()
    settings = config(tenant_name, limits={"token_count_max_body_bytes": 2_000})
    large = {**body, "metadata": {"padding": "x" * 3_000}}
    with gateway_client(tmp_path, redis_url, router, config=settings) as client:
        refused = client.post(path, json=large, headers=headers)
        small = client.post(path, json=body, headers=headers)
    assert refused.status_code == 413, refused.text
    assert "2,000 bytes" in refused.text
    assert small.status_code == 200
    assert messages.call_count + responses.call_count == 1


def test_a_tenant_whose_hard_budget_is_spent_cannot_count(
    tmp_path: Path, redis_url: str, tenant_name: str
) -> None:
    """One chat request reports a million input tokens ($2.50) against a $0.01 budget: counting is then
    refused like every other call, in each front's shape."""
    router, messages, responses = counting_upstream()
    settings = config(tenant_name, budget={"daily_usd": "0.01", "hard": True})
    with gateway_client(tmp_path, redis_url, router, config=settings) as client:
        before = client.post("/v1/messages/count_tokens", json=COUNT_BODY, headers=ANTHROPIC)
        spent = client.post("/v1/chat/completions", json=chat_body(max_tokens=10))
        request_id = spent.headers["x-gateway-request-id"]
        app_events(client, tenant_name, until=request_id)
        by_messages = client.post("/v1/messages/count_tokens", json=COUNT_BODY, headers=ANTHROPIC)
        by_responses = client.post("/v1/responses/input_tokens", json=INPUT_BODY)
        held = client.get("/v1/gateway/usage").json()
    assert before.status_code == 200 and spent.status_code == 200
    assert by_messages.status_code == 429 and by_messages.json()["error"]["type"] == "rate_limit_error"
    assert by_messages.json()["error"]["message"].startswith("budget_exceeded: ")
    assert by_responses.status_code == 429 and by_responses.json()["error"]["code"] == "budget_exceeded"
    assert messages.call_count == 1 and responses.call_count == 0
    assert held["reserved_usd"] == "0.000000000"  # the checks' one nano-dollar holds are given back


@pytest.mark.anyio
async def test_the_window_is_shared_by_every_process_and_per_tenant(redis_url: str, tenant_name: str) -> None:
    """Two limiters (two processes, or two replicas) on one Redis share one count; the next window starts
    afresh; another tenant has its own."""
    clock = [1_000_040.0]  # 20 s into a window (1,000,020 is a multiple of 60)
    redis = aioredis.Redis.from_url(redis_url)
    try:
        first = CountLimiter(redis, prefix="gw-test", clock=lambda: clock[0])
        second = CountLimiter(redis, prefix="gw-test", clock=lambda: clock[0])
        await first.admit(tenant_name, 3)
        await second.admit(tenant_name, 3)
        await first.admit(tenant_name, 3)
        with pytest.raises(RateLimited) as refused:
            await second.admit(tenant_name, 3)
        assert refused.value.retry_after == 40 and refused.value.headers() == {"retry-after": "40"}
        await first.admit(f"{tenant_name}-other", 3)
        clock[0] += 40
        await second.admit(tenant_name, 3)
        key = f"gw-test:{{{tenant_name}}}:counts:{int(clock[0] // 60)}"
        assert 0 < await redis.pttl(key) <= 120_000
    finally:
        await redis.aclose()


@pytest.mark.anyio
async def test_without_redis_each_process_counts_the_window_itself(tenant_name: str) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # bound and not listening: every connection is refused
        redis = aioredis.Redis(host="127.0.0.1", port=port, socket_connect_timeout=0.5)
        limiter = CountLimiter(redis, clock=lambda: 1_000_020.0)
        await limiter.admit(tenant_name, 2)
        await limiter.admit(tenant_name, 2)
        with pytest.raises(RateLimited):
            await limiter.admit(tenant_name, 2)
        await redis.aclose()
