"""Counting, the policy decision and the transforms, through the app, with the upstream mocked by respx.

The mock plays both the main model and the cheap model: a call whose system prompt asks for a summary
gets a well-formed three-section summary back.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import redis
import respx

from tests.factories import TENANT_KEY, UPSTREAM, completion, gateway_client, make_config, shared_counter
from tests.fixtures.conversations import conversation, conversation_of, document_with_needle, tokens_of
from tests.fixtures.haystack import ProseGenerator

SUMMARY = (
    "## User goal\nShip the report.\n## Confirmed conclusions\n- Q3 is done.\n## Open todos\n- Q4 numbers."
)


def is_summary_call(body: dict[str, Any]) -> bool:
    return any(
        "User goal" in str(m.get("content", "")) for m in body["messages"] if m.get("role") == "system"
    )


class Upstream:
    """Answers chat calls and remembers what each received."""

    def __init__(self) -> None:
        self.main: list[dict[str, Any]] = []
        self.summaries: list[dict[str, Any]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = orjson.loads(request.content)
        if is_summary_call(body):
            self.summaries.append(body)
            return httpx.Response(
                200, json=completion(SUMMARY, usage={"prompt_tokens": 1000, "completion_tokens": 50})
            )
        self.main.append(body)
        return httpx.Response(200, json=completion("done"))


@pytest.fixture
def upstream() -> Iterator[tuple[respx.Router, Upstream]]:
    router = respx.Router(assert_all_called=False)
    answer = Upstream()
    router.post(f"{UPSTREAM}/chat/completions").mock(side_effect=answer)
    yield router, answer


def test_small_request_forwards_with_exact_token_headers(
    tmp_path: Path, redis_url: str, upstream: Any
) -> None:
    router, answer = upstream
    body = {"model": "gpt-5.4", "messages": [{"role": "user", "content": "Hello there"}]}
    with gateway_client(tmp_path, redis_url, router) as client:
        response = client.post("/v1/chat/completions", json=body)
    assert response.status_code == 200
    expected = shared_counter().count_chat("gpt-5.4", body).total
    assert response.headers["x-gateway-action"] == "forward"
    assert response.headers["x-gateway-prompt-tokens"] == str(expected)
    assert response.headers["x-gateway-forwarded-tokens"] == str(expected)
    assert "x-gateway-warning" not in response.headers
    assert answer.main == [body]


def test_a_budgets_soft_line_is_warned_on_a_model_under_policy(
    tmp_path: Path, redis_url: str, upstream: Any, tenant_name: str
) -> None:
    router, _ = upstream
    budget = {"monthly_usd": 1, "soft_usd": "0.000000001"}  # any hold crosses the soft line
    config = make_config(tenants={tenant_name: {"keys": [TENANT_KEY], "budget": budget}})
    body = {"model": "gpt-5.4", "messages": [{"role": "user", "content": "Hello there"}]}
    with gateway_client(tmp_path, redis_url, router, config=config) as client:
        response = client.post("/v1/chat/completions", json=body)
    assert response.status_code == 200
    assert "monthly budget of $1.00" in response.headers["x-gateway-warning"]


def test_medium_request_is_counted_off_the_decision_path(
    tmp_path: Path, redis_url: str, upstream: Any
) -> None:
    router, _ = upstream
    messages = conversation(12, words_per_turn=600)
    body = {"model": "gpt-5.4", "messages": messages}
    assert len(orjson.dumps(body)) > 16 * 1024
    with gateway_client(tmp_path, redis_url, router) as client:
        response = client.post("/v1/chat/completions", json=body)
    assert response.headers["x-gateway-action"] == "forward"
    assert response.headers["x-gateway-prompt-tokens"] == str(tokens_of(messages))


def test_warning_band_compresses_then_reuses_the_summary(
    tmp_path: Path, redis_url: str, upstream: Any, tenant_name: str
) -> None:
    router, answer = upstream
    messages = conversation_of(255_000)
    received = tokens_of(messages)
    assert 250_000 <= received < 272_000
    config = make_config(tenants={tenant_name: {"keys": [TENANT_KEY]}})  # a fresh summary cache
    with gateway_client(tmp_path, redis_url, router, config=config) as client:
        first = client.post("/v1/chat/completions", json={"model": "gpt-5.4", "messages": messages})
        grown = [
            *messages,
            {"role": "assistant", "content": "done"},
            {"role": "user", "content": "And then?"},
        ]
        second = client.post("/v1/chat/completions", json={"model": "gpt-5.4", "messages": grown})
    assert first.status_code == 200, first.text
    assert first.headers["x-gateway-action"] == "compress"
    assert first.headers["x-gateway-prompt-tokens"] == str(received)
    forwarded = int(first.headers["x-gateway-forwarded-tokens"])
    assert forwarded <= 150_000  # 60% of the warning line, the default target
    assert "x-gateway-warning" in first.headers
    sent = answer.main[0]["messages"]
    assert sent[0] == messages[0]  # the system prompt stays verbatim
    assert sent[-1] == messages[-1]  # and so does the last user message
    assert any("Summary of the earlier conversation" in str(m["content"]) for m in sent)
    assert tokens_of(sent) == forwarded
    # ~250K tokens of old turns: summarised in chunks of at most 48K, then the chunk summaries merged
    calls = len(answer.summaries)
    assert calls > 1
    # the next turn resends the same prefix: the cached summary serves it, no new cheap-model call
    assert second.headers["x-gateway-action"] == "compress"
    assert len(answer.summaries) == calls


def test_over_cliff_document_is_retrieved(
    tmp_path: Path, redis_url: str, upstream: Any, tenant_name: str
) -> None:
    router, answer = upstream
    document = document_with_needle(
        4000, needle="The secret code for the blue lighthouse is 4821-ALPHA.", at=0.625
    )
    messages = [
        {"role": "system", "content": "Answer from the document."},
        {"role": "user", "content": document},
        {"role": "user", "content": "What is the secret code for the blue lighthouse?"},
    ]
    received = tokens_of(messages)
    assert received > 272_000
    config = make_config(tenants={tenant_name: {"keys": [TENANT_KEY]}})
    with gateway_client(tmp_path, redis_url, router, config=config) as client:
        response = client.post("/v1/chat/completions", json={"model": "gpt-5.4", "messages": messages})
    assert response.status_code == 200, response.text
    assert response.headers["x-gateway-action"] == "retrieve"
    forwarded = int(response.headers["x-gateway-forwarded-tokens"])
    assert forwarded <= 125_000  # the default budget: half the warning line
    sent = answer.main[0]["messages"]
    assert tokens_of(sent) == forwarded
    assert "4821-ALPHA" in orjson.dumps(sent).decode()
    assert sent[-1] == messages[-1]


def test_over_window_without_a_way_down_is_rejected_with_numbers(
    tmp_path: Path, redis_url: str, upstream: Any
) -> None:
    router, answer = upstream
    config = make_config()
    config["models"]["tiny"] = {"provider": "mock", "context_window": 1000}
    config["policies"] = {
        "default": {
            "name": "strict",
            "actions": {
                "below_warning": "forward",
                "warning": "reject",
                "over_cliff": "reject",
                "over_window": "reject",
            },
        }
    }
    text = " ".join(ProseGenerator(3).sentence() for _ in range(200))
    with gateway_client(tmp_path, redis_url, router, config=config) as client:
        response = client.post(
            "/v1/chat/completions", json={"model": "tiny", "messages": [{"role": "user", "content": text}]}
        )
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "context_length_exceeded"
    assert "1000" in error["message"].replace(",", "")
    assert answer.main == []


def small_bands_config(tenant: str, **policy: Any) -> dict[str, Any]:
    """gpt-5.2 with a warning line at 1,000 tokens and a cliff at 2,000, so tests stay small; ``tenant``
    holds the test key (a fresh one: no conversation state of an earlier run)."""
    config = make_config(tenants={tenant: {"keys": [TENANT_KEY]}})
    config["policies"] = {
        "bands": {"gpt-5.2": {"cliff_tokens": 2000, "warning_tokens": 1000}},
        "rules": [
            {"name": "observe-research", "match": {"headers": {"x-team": "research*"}}, "mode": "observe"},
        ],
        "default": {"name": "default", **policy},
    }
    config["tenants"][tenant]["allow_passthrough"] = True
    return config


def sized_body(words: int) -> dict[str, Any]:
    text = " ".join(ProseGenerator(5).sentence() for _ in range(words // 12 + 1))
    return {"model": "gpt-5.2", "messages": [{"role": "user", "content": text}]}


@pytest.mark.parametrize(
    ("headers", "action", "proposed"),
    [
        ({"x-team": "research-ml"}, "forward", "compress"),  # observe mode (its rule would compress)
        ({"x-gateway-policy": "passthrough"}, "forward", "retrieve"),  # the tenant may opt out
        ({}, "retrieve", None),
    ],
)
def test_observe_and_passthrough_forward_unchanged_in_the_warning_band(
    tmp_path: Path,
    redis_url: str,
    upstream: Any,
    tenant_name: str,
    headers: dict[str, str],
    action: str,
    proposed: str | None,
) -> None:
    router, answer = upstream
    config = small_bands_config(
        tenant_name,
        actions={"warning": "retrieve"},
        retrieve={"document_min_tokens": 800, "budget_tokens": 600},
    )
    body = sized_body(1300)
    received = tokens_of(body["messages"])
    assert 1000 <= received <= 2000
    with gateway_client(tmp_path, redis_url, router, config=config) as client:
        response = client.post("/v1/chat/completions", json=body, headers=headers)
    assert response.headers["x-gateway-action"] == action
    assert response.headers.get("x-gateway-proposed-action") == proposed
    assert "x-gateway-warning" in response.headers  # at or above the warning line
    if action == "forward":
        assert answer.main[-1]["messages"] == body["messages"]


def test_an_unexpected_failure_gives_the_budget_hold_back(
    tmp_path: Path, redis_url: str, tenant_name: str
) -> None:
    router = respx.Router(assert_all_called=False)
    router.post(f"{UPSTREAM}/chat/completions").mock(side_effect=RuntimeError("a bug, not an upstream error"))
    config = make_config(tenants={tenant_name: {"keys": [TENANT_KEY], "budget": {"monthly_usd": 100}}})
    body = {"model": "gpt-5.4", "messages": [{"role": "user", "content": "Hello there"}]}
    with gateway_client(tmp_path, redis_url, router, config=config) as client:
        with pytest.raises(RuntimeError):
            client.post("/v1/chat/completions", json=body)
    with redis.Redis.from_url(redis_url) as direct:
        held = direct.hget(f"gw:{{{tenant_name}}}:holds", "total")
        reserved = direct.hlen(f"gw:{{{tenant_name}}}:holds")
    assert reserved > 0  # the tenant's hold book was written: a hold was taken ...
    assert int(held or 0) == 0  # ... and given back
