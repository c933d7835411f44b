"""What bounds a shadow experiment: a refused hold skips that call only and what the refusal says of the
day's room skips, without Redis, the calls that cannot fit; a candidate's answer is read up to
``limits.shadow_max_response_bytes``. Real Redis; upstream mocked at the HTTP boundary (respx)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import redis
import respx

from gateway.ledger import LedgerKeys
from tests.factories import UPSTREAM, chat_body, completion, gateway_client
from tests.gateway.test_experiments_shadow import (
    by_model,
    config_with,
    ledger,
    pairs_of,
    traffic_of,
    wait_for,
)

pytestmark = pytest.mark.usefixtures("experiments_flush_often")


@pytest.fixture
def router() -> respx.Router:
    return respx.Router(assert_all_called=False)


def counters(redis_url: str, name: str) -> dict[str, int]:
    traffic = traffic_of(redis_url, name)
    return {field: traffic.get(field, 0) for field in ("shadowed", "over_budget", "failed", "oversized")}


def until(redis_url: str, name: str, **expected: int) -> dict[str, int]:
    """The counters once they reach ``expected`` (or as they are when the wait ends)."""
    found: dict[str, int] = wait_for(
        lambda: (
            (now := counters(redis_url, name))
            and all(now[field] >= count for field, count in expected.items())
            and now
        )
    ) or counters(redis_url, name)
    return found


def test_one_oversized_request_skips_its_own_shadow_call_only(
    tmp_path: Path, redis_url: str, router: respx.Router
) -> None:
    name = f"oversized-{uuid.uuid4().hex[:8]}"
    router.post(f"{UPSTREAM}/chat/completions").mock(return_value=httpx.Response(200, json=completion()))
    config = config_with(name, budget_usd_per_day=1)
    with gateway_client(tmp_path, redis_url, router, config=config) as client:
        # its candidate copy would be held for 4 x 100,000 output tokens at $4/M: $1.60, above the day's $1
        huge = client.post("/v1/chat/completions", json=chat_body(max_tokens=100_000, n=4))
        assert huge.status_code == 200
        assert until(redis_url, name, over_budget=1)["over_budget"] == 1
        for _ in range(3):
            assert client.post("/v1/chat/completions", json=chat_body()).status_code == 200
        found = until(redis_url, name, shadowed=3)
    assert found == {"shadowed": 3, "over_budget": 1, "failed": 0, "oversized": 0}
    assert len(pairs_of(redis_url, name)) == 3


def test_a_spent_budget_skips_what_cannot_fit_without_asking_redis_and_tries_what_can(
    tmp_path: Path, redis_url: str, router: respx.Router
) -> None:
    name = f"spent-{uuid.uuid4().hex[:8]}"
    tenant = f"experiment:{name}"
    usage = {"prompt_tokens": 9, "completion_tokens": 4_000, "total_tokens": 4_009}
    router.post(f"{UPSTREAM}/chat/completions").mock(
        return_value=httpx.Response(200, json=completion(usage=usage))
    )
    holds = LedgerKeys().holds(tenant)
    long_prompt = [{"role": "user", "content": "word " * 5_000}]
    plain = redis.Redis.from_url(redis_url)
    try:
        with gateway_client(
            tmp_path, redis_url, router, config=config_with(name, budget_usd_per_day="0.02")
        ) as client:
            client.post("/v1/chat/completions", json=chat_body())  # spends about $0.016 of the $0.02
            until(redis_url, name, shadowed=1)
            wait_for(lambda: ledger(redis_url, tenant))
            client.post("/v1/chat/completions", json=chat_body())  # held for ~$0.0164: refused by Redis
            until(redis_url, name, over_budget=1)
            # from here Redis cannot take a hold of this experiment: a call that asks it fails
            plain.set(holds, "not a hash")
            client.post("/v1/chat/completions", json=chat_body())  # its output cap alone cannot fit
            until(redis_url, name, over_budget=2)
            long_capped = chat_body(messages=long_prompt, max_tokens=100)  # its prompt cannot fit
            client.post("/v1/chat/completions", json=long_capped)
            until(redis_url, name, over_budget=3)
            client.post("/v1/chat/completions", json=chat_body(max_tokens=100))  # fits: it is tried
            found = until(redis_url, name, over_budget=3, failed=1)
    finally:
        plain.delete(holds)
        plain.close()
    assert found == {"shadowed": 1, "over_budget": 3, "failed": 1, "oversized": 0}
    assert len(pairs_of(redis_url, name)) == 2  # the one shadowed, the one that failed asking Redis


def test_a_candidate_answer_past_the_limit_is_cut_and_counted(
    tmp_path: Path, redis_url: str, router: respx.Router
) -> None:
    name = f"long-{uuid.uuid4().hex[:8]}"
    tenant = f"experiment:{name}"
    primary = completion("Short.")
    router.post(f"{UPSTREAM}/chat/completions").mock(
        side_effect=by_model(
            {
                "gpt-5.4": lambda body: httpx.Response(200, content=orjson.dumps(primary)),
                "gpt-5.2": lambda body: httpx.Response(200, json=completion("x" * 200_000, model="gpt-5.2")),
            }
        )
    )
    config = config_with(name)
    config["limits"] = {"shadow_max_response_bytes": 64 * 1024}
    with gateway_client(tmp_path, redis_url, router, config=config) as client:
        response = client.post("/v1/chat/completions", json=chat_body())
        found = until(redis_url, name, failed=1, oversized=1)
        [pair] = wait_for(lambda: pairs_of(redis_url, name))
        [event] = wait_for(lambda: ledger(redis_url, tenant))
    assert response.status_code == 200 and response.content == orjson.dumps(primary)
    assert found == {"shadowed": 0, "over_budget": 0, "failed": 1, "oversized": 1}
    assert pair["candidate"]["error"] == "response_too_large" and pair["agreement"] is None
    assert event.estimated and event.output_tokens >= 64 * 1024 // 4  # billed: the provider ran it


def test_a_candidate_stream_past_the_limit_is_not_read_further(
    tmp_path: Path, redis_url: str, router: respx.Router
) -> None:
    name = f"endless-{uuid.uuid4().hex[:8]}"
    produced: list[int] = []

    def stream(body: dict[str, Any]) -> httpx.Response:
        delta = {"model": body["model"], "choices": [{"index": 0, "delta": {"content": "y" * 1_000}}]}
        event = b"data: " + orjson.dumps(delta) + b"\n\n"

        async def events() -> AsyncIterator[bytes]:
            for _ in range(1_000):  # about 1 MB
                produced.append(1)
                yield event
            yield b"data: [DONE]\n\n"

        return httpx.Response(200, content=events(), headers={"content-type": "text/event-stream"})

    def short(body: dict[str, Any]) -> httpx.Response:
        delta = {"model": body["model"], "choices": [{"index": 0, "delta": {"content": "Hi"}}]}
        payload = b"data: " + orjson.dumps(delta) + b"\n\ndata: [DONE]\n\n"

        async def events() -> AsyncIterator[bytes]:
            yield payload

        return httpx.Response(200, content=events(), headers={"content-type": "text/event-stream"})

    router.post(f"{UPSTREAM}/chat/completions").mock(
        side_effect=by_model({"gpt-5.4": short, "gpt-5.2": stream})
    )
    config = config_with(name)
    config["limits"] = {"shadow_max_response_bytes": 64 * 1024}
    with gateway_client(tmp_path, redis_url, router, config=config) as client:
        with client.stream("POST", "/v1/chat/completions", json=chat_body(stream=True)) as response:
            relayed = b"".join(response.iter_bytes())
        found = until(redis_url, name, failed=1, oversized=1)
        [pair] = wait_for(lambda: pairs_of(redis_url, name))
    assert response.status_code == 200 and b"Hi" in relayed
    assert found["oversized"] == 1 and found["failed"] == 1
    assert pair["candidate"]["error"] == "response_too_large"
    assert len(produced) < 100  # cut after about 64 KB of the 1 MB, never read to the end
