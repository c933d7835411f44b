"""Rate limits as the caller sees them, through the app (providers mocked at the HTTP boundary): every
answer of a rate-limited tenant carries its own limits in the front's headers instead of the provider's,
a refusal is a 429 ``rate_limit_exceeded`` in the front's own error shape with ``Retry-After``, tokens held
at the output cap are settled to the usage, and a tenant without limits sees the provider's headers as
before."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import redis
import respx

from tests.factories import OTHER_KEY, chat_body, gateway_client
from tests.gateway.test_cost_headers import (
    CHAT_USAGE,
    UPSTREAM,
    chat_reply,
    embeddings_reply,
    responses_reply,
)
from tests.gateway.test_messages_pipeline import ANTHROPIC_HEADERS, CLAUDE, Upstream, config, create_body

PROVIDER_LIMITS = {
    "x-ratelimit-limit-requests": "30000",
    "x-ratelimit-remaining-requests": "29999",
    "x-ratelimit-limit-tokens": "150000000",
}


@pytest.fixture
def tenant() -> str:
    return f"limited-{uuid.uuid4().hex[:10]}"  # the Redis is shared: a tenant per test


def with_provider_limits(request: httpx.Request) -> httpx.Response:
    answer = chat_reply(request)
    answer.headers.update(PROVIDER_LIMITS)
    return answer


def settings(tenant: str, limits: dict[str, Any]) -> dict[str, Any]:
    base = config(tenant)
    base["tenants"][tenant]["rate_limits"] = limits
    base["tenants"]["unlimited"] = {"keys": [OTHER_KEY]}
    return base


def router() -> respx.Router:
    routes = respx.Router(assert_all_called=False)
    routes.post(f"{UPSTREAM}/chat/completions").mock(side_effect=with_provider_limits)
    routes.post(f"{UPSTREAM}/responses").mock(side_effect=responses_reply)
    routes.post(f"{UPSTREAM}/embeddings").mock(side_effect=embeddings_reply)
    routes.post(f"{CLAUDE}/messages").mock(side_effect=Upstream().messages)
    return routes


def test_ratelimit_headers_replace_the_providers_on_every_front(
    tmp_path: Path, redis_url: str, tenant: str
) -> None:
    limits = {"requests_per_minute": 100, "tokens_per_minute": 1_000_000}
    with gateway_client(tmp_path, redis_url, router(), config=settings(tenant, limits)) as client:
        chat = client.post("/v1/chat/completions", json=chat_body(max_completion_tokens=100))
        stream = client.post("/v1/chat/completions", json=chat_body(stream=True))
        responses = client.post("/v1/responses", json={"model": "gpt-5.4", "input": "Hello there"})
        messages = client.post("/v1/messages", json=create_body(), headers=ANTHROPIC_HEADERS)
        unlimited = client.post(
            "/v1/chat/completions", json=chat_body(), headers={"authorization": f"Bearer {OTHER_KEY}"}
        )
    for answer in (chat, stream, responses, messages, unlimited):
        assert answer.status_code == 200, answer.text
    assert chat.headers["x-ratelimit-limit-requests"] == "100"
    assert chat.headers["x-ratelimit-remaining-requests"] == "99"
    assert chat.headers["x-ratelimit-reset-requests"] == "600ms"
    assert chat.headers["x-ratelimit-limit-tokens"] == "1000000"
    assert 1_000_000 - 200 < int(chat.headers["x-ratelimit-remaining-tokens"]) < 1_000_000 - 100
    assert stream.headers["x-ratelimit-remaining-requests"] == "98"
    assert stream.headers["x-ratelimit-limit-tokens"] == "1000000"
    assert responses.headers["x-ratelimit-remaining-requests"] == "97"
    assert messages.headers["anthropic-ratelimit-requests-limit"] == "100"
    assert messages.headers["anthropic-ratelimit-requests-remaining"] == "96"
    assert messages.headers["anthropic-ratelimit-requests-reset"].endswith("Z")
    assert messages.headers["anthropic-ratelimit-tokens-limit"] == "1000000"
    assert not any(name.startswith("x-ratelimit-") for name in messages.headers)
    # a tenant without limits sees the provider's, as before
    assert unlimited.headers["x-ratelimit-limit-requests"] == "30000"
    assert "anthropic-ratelimit-requests-limit" not in unlimited.headers


def test_ratelimit_refusals_in_each_fronts_shape(tmp_path: Path, redis_url: str, tenant: str) -> None:
    with gateway_client(
        tmp_path, redis_url, router(), config=settings(tenant, {"requests_per_minute": 1})
    ) as client:
        first = client.post("/v1/chat/completions", json=chat_body())
        chat = client.post("/v1/chat/completions", json=chat_body())
        responses = client.post("/v1/responses", json={"model": "gpt-5.4", "input": "Hello there"})
        messages = client.post("/v1/messages", json=create_body(), headers=ANTHROPIC_HEADERS)
    assert first.status_code == 200
    for refused in (chat, responses, messages):
        assert refused.status_code == 429, refused.text
        assert 1 <= int(refused.headers["retry-after"]) <= 60
        assert 0 < int(refused.headers["retry-after-ms"]) <= 60_000
    for refused in (chat, responses):
        error = refused.json()["error"]
        assert (error["code"], error["type"]) == ("rate_limit_exceeded", "requests")
        assert "Rate limit reached for requests per minute for the tenant" in error["message"]
        assert refused.headers["x-ratelimit-limit-requests"] == "1"
        assert refused.headers["x-ratelimit-remaining-requests"] == "0"
    body = messages.json()
    assert body["type"] == "error" and body["error"]["type"] == "rate_limit_error"
    assert body["error"]["message"].startswith("rate_limit_exceeded: ")
    assert messages.headers["anthropic-ratelimit-requests-remaining"] == "0"
    assert "x-ratelimit-limit-requests" not in messages.headers


def held_tokens(redis_url: str, tenant: str) -> float:
    """What the tenant's tokens counter holds, in tokens (refill aside)."""
    with redis.Redis.from_url(redis_url) as client:
        found = client.get(f"gw:{{{tenant}}}:rate:tenant:t")
    return 0 if found is None else float(found.split()[0]) / 60_000_000


def test_ratelimit_tokens_held_at_the_cap_are_settled_to_the_usage(
    tmp_path: Path, redis_url: str, tenant: str
) -> None:
    """The request holds its count plus ``max_completion_tokens`` (50,000); its usage says 1,020."""
    with gateway_client(
        tmp_path, redis_url, router(), config=settings(tenant, {"tokens_per_minute": 100_000})
    ) as client:
        answer = client.post("/v1/chat/completions", json=chat_body(max_completion_tokens=50_000))
        assert answer.status_code == 200
        assert int(answer.headers["x-ratelimit-remaining-tokens"]) < 50_000
        deadline = time.monotonic() + 10
        while held_tokens(redis_url, tenant) > 2_000 and time.monotonic() < deadline:
            time.sleep(0.02)
    used = CHAT_USAGE["prompt_tokens"] + CHAT_USAGE["completion_tokens"]
    assert held_tokens(redis_url, tenant) <= used  # less what refilled since


def test_ratelimit_a_request_too_large_for_the_limit_is_not_retried(
    tmp_path: Path, redis_url: str, tenant: str
) -> None:
    with gateway_client(
        tmp_path, redis_url, router(), config=settings(tenant, {"tokens_per_minute": 1_000})
    ) as client:
        refused = client.post("/v1/chat/completions", json=chat_body())  # 4,096 output tokens held
    assert refused.status_code == 429
    assert refused.headers["x-should-retry"] == "false"
    assert orjson.loads(refused.content)["error"]["type"] == "tokens"


def test_ratelimit_redis_down_refuses_or_lets_through_as_the_tenant_chose(
    tmp_path: Path, dead_redis_url: str, tenant: str
) -> None:
    limits = settings(tenant, {"requests_per_minute": 10})
    limits["tenants"]["unlimited"]["rate_limits"] = {"requests_per_minute": 10}
    limits["tenants"]["unlimited"]["budget"] = {"monthly_usd": 100, "on_redis_down": "open", "hard": True}
    with gateway_client(tmp_path, dead_redis_url, router(), config=limits) as client:
        closed = client.post("/v1/chat/completions", json=chat_body())
        opened = client.post(
            "/v1/chat/completions", json=chat_body(), headers={"authorization": f"Bearer {OTHER_KEY}"}
        )
    assert closed.status_code == 503
    assert closed.json()["error"]["code"] == "rate_limits_unavailable"
    assert opened.status_code == 200, opened.text
    assert "rate limits not enforced: Redis is unreachable" in opened.headers["x-gateway-warning"]
    assert not any(name.startswith("x-ratelimit-") for name in opened.headers)  # nor the provider's


def test_ratelimit_embeddings_count_held_at_their_bytes_and_settled(
    tmp_path: Path, redis_url: str, tenant: str
) -> None:
    """An embeddings call holds one token per byte of its body (it produces none), settled to its usage."""
    limits = {"requests_per_minute": 10, "tokens_per_minute": 20_000}  # what is held refills in 30 s
    text = "word " * 2_000
    with gateway_client(tmp_path, redis_url, router(), config=settings(tenant, limits)) as client:
        answer = client.post("/v1/embeddings", json={"model": "text-embedding-3-small", "input": text})
        assert answer.status_code == 200, answer.text
        assert answer.headers["x-ratelimit-remaining-requests"] == "9"
        assert int(answer.headers["x-ratelimit-remaining-tokens"]) <= 20_000 - len(text)
        deadline = time.monotonic() + 10
        while held_tokens(redis_url, tenant) > 100 and time.monotonic() < deadline:
            time.sleep(0.02)
    assert held_tokens(redis_url, tenant) <= 7  # the usage's prompt_tokens, less what refilled since
