"""Honest savings, end to end: a growing session through the gateway and the caching mock upstream.

The same scripted conversation (the client resends its whole history each turn) is sent twice: straight to
the mock, which bills each request with the cached tokens its simulated prompt cache gives (what
forwarding everything unchanged costs), and through a gateway whose bands are small enough to compress the
later turns. The real saving is the first bill minus everything the gateway's run cost (its requests and
the cheap model's summaries), computed from what the mock reported; the ledger's claimed saving must match.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import openai
import orjson
import pytest

from gateway.base.types import Usage
from gateway.config.schema.root import ModelPricing
from gateway.money.pricing import price
from tests.e2e.processes import gateway_process
from tests.factories import TENANT_KEY, make_config, write_config
from tests.fixtures.conversations import ProseGenerator

GPT_5_4 = ModelPricing(input=Decimal("2.50"), cached_input=Decimal("0.25"), output=Decimal("15.00"))
TURNS = 26


def savings_config(mock_url: str, tenant: str) -> dict[str, Any]:
    config = make_config(tenants={tenant: {"keys": [TENANT_KEY]}})
    config["providers"]["mock"]["base_url"] = f"{mock_url}/v1"
    config["models"]["small"]["pricing"] = {"input": "0.25", "cached_input": "0.025", "output": "2.00"}
    config["limits"] = {"track_conversations_from": 1024}
    config["policies"] = {
        "bands": {"gpt-5.4": {"warning_tokens": 6000, "cliff_tokens": 9000}},
        "default": {
            "name": "default",
            "actions": {"warning": "compress", "over_cliff": "compress"},
            "compress": {
                "cheap_model": "small",
                "keep_recent_turns": 2,
                "target_ratio": 0.6,
                "pinned_tokens": 0,
                "recall_tokens": 0,
            },
        },
    }
    return config


@pytest.fixture(scope="module")
def savings_gateway(
    tmp_path_factory: pytest.TempPathFactory, mock_url: str, redis_url: str
) -> Iterator[tuple[str, str]]:
    tenant = f"savings-{int(time.time() * 1000)}"
    directory = tmp_path_factory.mktemp("savings")
    path = write_config(directory / "gateway.yaml", savings_config(mock_url, tenant))
    with gateway_process(path, redis_url, directory) as url:
        yield url, tenant


def session() -> list[list[dict[str, Any]]]:
    """The prompts of a scripted session: each turn adds about 700 tokens of user text and an answer."""
    prose = ProseGenerator(11)
    history: list[dict[str, Any]] = [{"role": "system", "content": "You are a careful analyst. " * 40}]
    prompts = []
    for turn in range(TURNS):
        question = " ".join(prose.sentence() for _ in range(30))
        history.append({"role": "user", "content": f"Turn {turn}: {question}"})
        prompts.append(list(history))
        history.append({"role": "assistant", "content": " ".join(prose.sentence() for _ in range(6))})
    return prompts


def cost_of(usage: dict[str, Any]) -> int:
    details = usage.get("prompt_tokens_details") or {}
    reported = Usage(
        input_tokens=usage["prompt_tokens"],
        cached_input_tokens=details.get("cached_tokens", 0),
        output_tokens=usage["completion_tokens"],
    )
    return price(reported, GPT_5_4).total_nanos


def events(gateway: str, tenant: str, count: int, timeout: float = 20.0) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout
    while True:
        answer = httpx.get(
            f"{gateway}/admin/costs",
            params={"tenant": tenant, "format": "ndjson"},
            headers={"authorization": "Bearer admin-e2e"},
            timeout=10,
        )
        found = [orjson.loads(line) for line in answer.text.splitlines() if line]
        if len([e for e in found if e["parent_id"] is None]) >= count or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


def test_a_growing_session_claims_the_saving_it_really_made(
    savings_gateway: tuple[str, str], mock: httpx.Client, mock_url: str
) -> None:
    gateway, tenant = savings_gateway
    prompts = session()
    direct = openai.OpenAI(base_url=f"{mock_url}/v1", api_key="unused", max_retries=0)
    unchanged = 0
    for messages in prompts:
        answer = direct.chat.completions.create(model="gpt-5.4", messages=messages, max_completion_tokens=50)
        assert answer.usage is not None
        unchanged += cost_of(answer.usage.model_dump())
    mock.post("/_reset")  # a cold cache again, for the run through the gateway
    through = openai.OpenAI(base_url=f"{gateway}/v1", api_key=TENANT_KEY, max_retries=0)
    actions = []
    for messages in prompts:
        raw = through.chat.completions.with_raw_response.create(
            model="gpt-5.4", messages=messages, max_completion_tokens=50
        )
        actions.append(raw.headers["x-gateway-action"])
    assert actions[0] == "forward" and "compress" in actions

    stored = events(gateway, tenant, len(prompts))
    spent = sum(int(Decimal(event["cost_usd"]) * 10**9) for event in stored)
    claimed = sum(int(Decimal(event["saving_usd"]) * 10**9) for event in stored)
    real = unchanged - spent
    assert real > 0
    assert abs(claimed - real) <= 0.15 * real, (claimed, real)
    compressed = [e for e in stored if e["action"] == "compress"]
    assert {e["counterfactual_basis"] for e in compressed} == {"conversation"}
    assert all(e["counterfactual_cached_tokens"] > 0 for e in compressed)
    forwarded = [e for e in stored if e["action"] == "forward"]
    assert all(e["saving_usd"] == "0.000000000" for e in forwarded)
    assert any(e["cached_tokens"] > 0 for e in forwarded)  # the mock's cache was seen


def test_the_caching_mock_can_be_turned_off(mock: httpx.Client, mock_url: str, tmp_path: Path) -> None:
    direct = openai.OpenAI(base_url=f"{mock_url}/v1", api_key="unused", max_retries=0)
    messages = session()[3]
    direct.chat.completions.create(model="gpt-5.4", messages=messages)
    warm = direct.chat.completions.create(model="gpt-5.4", messages=messages)
    mock.post("/_control", json={"cache": False})
    off = direct.chat.completions.create(model="gpt-5.4", messages=messages)
    assert warm.usage is not None and off.usage is not None
    assert warm.usage.prompt_tokens_details is not None and off.usage.prompt_tokens_details is not None
    assert warm.usage.prompt_tokens_details.cached_tokens >= 1024
    assert off.usage.prompt_tokens_details.cached_tokens == 0


def test_a_conversation_back_after_a_pause_longer_than_the_retention_is_priced_cold(
    tmp_path: Path, mock: httpx.Client, mock_url: str, redis_url: str
) -> None:
    """Its state outlives the cache (``limits.conversation_memory_seconds``): the returning turn is known
    to be cold, so the unchanged request is priced with nothing cached, as the provider bills it."""
    tenant = f"pause-{int(time.time() * 1000)}"
    config = savings_config(mock_url, tenant)
    config["providers"]["mock"]["prompt_cache"] = {"retention_seconds": 1}
    path = write_config(tmp_path / "gateway.yaml", config)
    prompts = session()
    mock.post("/_reset")
    with gateway_process(path, redis_url, tmp_path) as gateway:
        through = openai.OpenAI(base_url=f"{gateway}/v1", api_key=TENANT_KEY, max_retries=0)
        actions = []
        for messages in prompts[:-1]:
            raw = through.chat.completions.with_raw_response.create(
                model="gpt-5.4", messages=messages, max_completion_tokens=50
            )
            actions.append(raw.headers["x-gateway-action"])
        assert "compress" in actions
        mock.post("/_control", json={"cache_age_seconds": 600})  # the provider's cache is gone
        time.sleep(1.5)  # and the gateway's retention of 1 s has passed
        last = through.chat.completions.with_raw_response.create(
            model="gpt-5.4", messages=prompts[-1], max_completion_tokens=50
        )
        request_id = last.headers["x-gateway-request-id"]
        stored = events(gateway, tenant, len(prompts))
    [event] = [e for e in stored if e["id"] == request_id]
    assert event["action"] == "compress"  # a cold cache: the rewrite costs nothing extra
    assert (event["counterfactual_basis"], event["counterfactual_cached_tokens"]) == ("conversation_cold", 0)
    assert event["estimated"] is False
    # what forwarding it would really have cost: the whole prompt uncached, as the cold provider bills it
    unchanged = Usage(input_tokens=int(last.headers["x-gateway-prompt-tokens"]), output_tokens=50)
    answer_tokens = event["output_tokens"]
    expected = price(Usage(unchanged.input_tokens, 0, answer_tokens), GPT_5_4).total_nanos
    assert int(Decimal(event["counterfactual_usd"]) * 10**9) == expected


def test_an_edited_first_message_is_priced_with_only_the_opening_the_provider_still_holds(
    savings_gateway: tuple[str, str], mock: httpx.Client, mock_url: str
) -> None:
    """The edit names a new conversation, unknown to the gateway: what the unchanged request shares with
    what the provider holds is the opening (tools, system prompt), not the tenant's usual cached share."""
    gateway, tenant = savings_gateway
    system = {"role": "system", "content": "You review contracts clause by clause. " * 300}
    prompts = [[system, *messages[1:]] for messages in session()[:14]]
    through = openai.OpenAI(base_url=f"{gateway}/v1", api_key=TENANT_KEY, max_retries=0)
    for messages in prompts[:-1]:
        through.chat.completions.create(model="gpt-5.4", messages=messages, max_completion_tokens=50)
    edited = [dict(message) for message in prompts[-1]]
    edited[1]["content"] = "Edited: " + edited[1]["content"]
    raw = through.chat.completions.with_raw_response.create(
        model="gpt-5.4", messages=edited, max_completion_tokens=50
    )
    assert raw.headers["x-gateway-action"] == "compress"
    request_id = raw.headers["x-gateway-request-id"]
    deadline = time.monotonic() + 20
    found: list[dict[str, Any]] = []
    while not found and time.monotonic() < deadline:
        found = [e for e in events(gateway, tenant, 10_000, timeout=0.5) if e["id"] == request_id]
    [event] = found
    assert event["counterfactual_basis"] == "opening" and event["estimated"] is False
    # what the provider really holds of the edited request: the system prompt, as the mock bills it
    direct = openai.OpenAI(base_url=f"{mock_url}/v1", api_key="unused", max_retries=0)
    answer = direct.chat.completions.create(model="gpt-5.4", messages=edited, max_completion_tokens=50)
    assert answer.usage is not None and answer.usage.prompt_tokens_details is not None
    held = answer.usage.prompt_tokens_details.cached_tokens or 0
    assert held >= 1024  # the long system prompt was cached by the requests before
    assert abs(event["counterfactual_cached_tokens"] - held) <= 128, (
        event["counterfactual_cached_tokens"],
        held,
    )


def test_a_branch_back_to_before_a_compaction_records_the_cache_the_compaction_cost(
    savings_gateway: tuple[str, str], mock: httpx.Client, mock_url: str
) -> None:
    """The compacted requests never send the early turns as the client has them, so the provider lets
    that prefix expire while a client forwarding everything keeps it warm (the mock's cache is aged 100 s
    after each request, its retention being 300 s): a branch back to before the compaction finds the
    provider cold, and its event records that loss as a negative saving, as the mock bills it."""
    gateway, tenant = savings_gateway
    system = {"role": "system", "content": "You answer questions on shipping law. " * 40}
    prompts = [[system, *messages[1:]] for messages in session()[:14]]
    branch = [*prompts[5][:-1], {"role": "user", "content": "Back to this point: summarise what we know."}]

    def run(client: openai.OpenAI) -> Any:
        for messages in prompts:
            client.chat.completions.create(model="gpt-5.4", messages=messages, max_completion_tokens=50)
            mock.post("/_control", json={"cache_age_seconds": 100})
        return client.chat.completions.with_raw_response.create(
            model="gpt-5.4", messages=branch, max_completion_tokens=50
        )

    mock.post("/_reset")
    direct = run(openai.OpenAI(base_url=f"{mock_url}/v1", api_key="unused", max_retries=0)).parse()
    assert direct.usage is not None
    unchanged = cost_of(direct.usage.model_dump())
    mock.post("/_reset")
    raw = run(openai.OpenAI(base_url=f"{gateway}/v1", api_key=TENANT_KEY, max_retries=0))
    assert "branches from an earlier turn" in raw.headers["x-gateway-warning"]
    request_id = raw.headers["x-gateway-request-id"]
    deadline = time.monotonic() + 20
    found: list[dict[str, Any]] = []
    while not found and time.monotonic() < deadline:
        found = [
            e for e in events(gateway, tenant, 10_000, timeout=0.5) if request_id in (e["id"], e["parent_id"])
        ]
    [event] = [e for e in found if e["id"] == request_id]
    # kept compacted (the prefix the provider holds now) or sent unchanged, the branch is priced against
    # the client's own previous request, which forwarding everything would have left warm
    assert event["counterfactual_basis"] in ("conversation", "conversation_lost"), str(event)
    spent = sum(int(Decimal(e["cost_usd"]) * 10**9) for e in found)  # its summary calls included
    claimed = sum(int(Decimal(e["saving_usd"]) * 10**9) for e in found)
    real = unchanged - spent
    assert real < 0  # the compaction did cost the branch its cache
    assert abs(claimed - real) <= 0.1 * abs(real), (claimed, real)
    assert int(Decimal(raw.headers["x-gateway-saving-usd"]) * 10**9) == claimed
    assert raw.headers["x-gateway-saving-basis"] == event["counterfactual_basis"]


def test_a_history_past_the_models_window_claims_no_saving(
    tmp_path: Path, mock: httpx.Client, mock_url: str, redis_url: str
) -> None:
    """Forwarding it unchanged was impossible (the provider refuses a prompt past the window, unbilled):
    the event says so (``over_window``) and claims nothing, its counterfactual being its own cost."""
    tenant = f"window-{int(time.time() * 1000)}"
    config = savings_config(mock_url, tenant)
    config["models"]["gpt-5.4"]["context_window"] = 12_000
    config["policies"]["bands"]["gpt-5.4"] = {"warning_tokens": 6000, "cliff_tokens": 9000}
    path = write_config(tmp_path / "gateway.yaml", config)
    messages = session()[19]  # about 17K tokens: past the 12K window
    mock.post("/_reset")
    with gateway_process(path, redis_url, tmp_path) as gateway:
        through = openai.OpenAI(base_url=f"{gateway}/v1", api_key=TENANT_KEY, max_retries=0)
        raw = through.chat.completions.with_raw_response.create(
            model="gpt-5.4", messages=messages, max_completion_tokens=50
        )
        assert int(raw.headers["x-gateway-prompt-tokens"]) > 12_000
        assert raw.headers["x-gateway-action"] in ("compress", "retrieve")
        request_id = raw.headers["x-gateway-request-id"]
        stored = events(gateway, tenant, 1)
    [event] = [e for e in stored if e["id"] == request_id]
    assert event["counterfactual_basis"] == "over_window"
    assert event["saving_usd"] == "0.000000000" and event["counterfactual_usd"] == event["cost_usd"]
    assert raw.headers["x-gateway-saving-basis"] == "over_window"
