"""``gateway serve`` with ``GATEWAY_MOCK_UPSTREAM`` (``--mock-upstream``): a config whose providers read
``${OPENAI_BASE_URL}`` and ``${ANTHROPIC_BASE_URL}`` calls the built-in mock, so both official SDKs get
answers through the whole gateway, priced and recorded, with no provider key and no other process."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import orjson
import pytest
import yaml

from tests.e2e.processes import gateway_process

pytestmark = pytest.mark.e2e

KEY = "sk-gw-mock-e2e"
ADMIN = {"authorization": "Bearer admin-e2e"}  # processes.gateway_process sets GATEWAY_ADMIN_KEY
PRICES = {"input": "2.50", "cached_input": "0.25", "output": "15.00"}


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory, redis_url: str) -> Iterator[tuple[str, str, Path]]:
    """The gateway's URL, its tenant's name, and its log."""
    where = tmp_path_factory.mktemp("mock-upstream")
    tenant = f"mock-{uuid.uuid4().hex[:8]}"
    config = {
        "providers": {
            "openai": {"base_url": "${OPENAI_BASE_URL}", "api_key": "${OPENAI_API_KEY}"},
            "anthropic": {
                "kind": "anthropic",
                "base_url": "${ANTHROPIC_BASE_URL}",
                "api_key": "${ANTHROPIC_API_KEY}",
                "messages_count_tokens": True,
            },
        },
        "models": {
            "gpt-5.4": {"provider": "openai", "max_output_tokens": 1000, "pricing": PRICES},
            "claude-sonnet-4-5": {"provider": "anthropic", "max_output_tokens": 1000, "pricing": PRICES},
            "text-embedding-3-small": {
                "provider": "openai",
                "kind": "embedding",
                "pricing": {"input": "0.02", "output": "0"},
            },
        },
        "tenants": {tenant: {"keys": ["${DEFAULT_TENANT_KEY}"]}},
    }
    path = where / "gateway.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    env = {"GATEWAY_MOCK_UPSTREAM": "true", "DEFAULT_TENANT_KEY": KEY}
    with gateway_process(path, redis_url, where, extra_env=env) as url:
        yield url, tenant, where / "gateway.log"


def recorded(url: str, tenant: str, request_id: str) -> dict[str, Any]:
    """The request's cost event, once the ledger has written it (in the background, after the answer)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        answer = httpx.get(f"{url}/admin/costs", params={"tenant": tenant, "format": "ndjson"}, headers=ADMIN)
        events = [orjson.loads(line) for line in answer.text.splitlines() if line.strip()]
        found = next((e for e in events if e["id"] == request_id), None)
        if found is not None:
            return found
        time.sleep(0.05)
    raise AssertionError(f"{request_id} was not recorded within 60 s")


def test_mock_upstream_start_prints_the_key_and_a_request(gateway: tuple[str, str, Path]) -> None:
    url, tenant, log = gateway
    printed = log.read_text()
    assert f"gateway: tenant {tenant}'s key (DEFAULT_TENANT_KEY): {KEY}" in printed
    curl = next(line for line in printed.splitlines() if "curl" in line)
    done = httpx.post(
        f"{url}/v1/chat/completions",
        headers={"authorization": f"Bearer {KEY}"},
        json={"model": "gpt-5.4", "messages": [{"role": "user", "content": "Hello"}]},
    )
    assert done.status_code == 200 and f"{url}/v1/chat/completions" in curl


def test_mock_upstream_answers_chat_streams_through_the_gateway(gateway: tuple[str, str, Path]) -> None:
    url, _, _ = gateway
    client = openai.OpenAI(base_url=f"{url}/v1", api_key=KEY, max_retries=0)
    stream = client.chat.completions.create(
        model="gpt-5.4", messages=[{"role": "user", "content": "Stream this"}], stream=True
    )
    text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert text == 'This is the mock upstream answering as gpt-5.4. You said: "Stream this"'


def test_mock_upstream_answers_responses_and_embeddings(gateway: tuple[str, str, Path]) -> None:
    url, _, _ = gateway
    client = openai.OpenAI(base_url=f"{url}/v1", api_key=KEY, max_retries=0)
    with client.responses.stream(model="gpt-5.4", input="Hi there") as stream:
        final = stream.get_final_response()
    assert final.output_text.endswith('You said: "Hi there"') and final.usage is not None
    vectors = client.embeddings.create(model="text-embedding-3-small", input=["a", "b"])
    assert len(vectors.data) == 2 and vectors.usage.prompt_tokens > 0


def test_mock_upstream_answers_anthropic_messages(gateway: tuple[str, str, Path]) -> None:
    url, _, _ = gateway
    client = anthropic.Anthropic(base_url=url, api_key=KEY, max_retries=0)
    hello = [{"role": "user", "content": "Hello"}]
    whole = client.messages.create(model="claude-sonnet-4-5", max_tokens=100, messages=hello)  # type: ignore[arg-type]
    assert whole.content[0].text.endswith('You said: "Hello"')  # type: ignore[union-attr]
    with client.messages.stream(model="claude-sonnet-4-5", max_tokens=100, messages=hello) as stream:  # type: ignore[arg-type]
        streamed = stream.get_final_message()
    assert [block.text for block in streamed.content] == [whole.content[0].text]  # type: ignore[union-attr]
    assert streamed.usage.output_tokens == whole.usage.output_tokens
    counted = client.messages.count_tokens(model="claude-sonnet-4-5", messages=hello)  # type: ignore[arg-type]
    assert counted.input_tokens > 0


def test_mock_upstream_calls_are_priced_into_the_ledger(gateway: tuple[str, str, Path]) -> None:
    url, tenant, _ = gateway
    client = openai.OpenAI(base_url=f"{url}/v1", api_key=KEY, max_retries=0)
    raw = client.chat.completions.with_raw_response.create(
        model="gpt-5.4", messages=[{"role": "user", "content": "Count me"}]
    )
    request_id = raw.headers["x-gateway-request-id"]
    assert raw.headers["x-gateway-cost-usd"] != "0"
    event = recorded(url, tenant, request_id)
    usage = raw.parse().usage
    assert usage is not None and event["input_tokens"] == usage.prompt_tokens and not event["estimated"]
