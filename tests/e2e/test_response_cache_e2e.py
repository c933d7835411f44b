"""The exact response cache through a real gateway process and the mock upstream, with the official SDKs:
a chat completion asked twice (the second from the cache, the mock never called again), a stream answered
from the cache as chunks the openai SDK parses, a Messages request answered from the cache to the anthropic
SDK, whole and streamed; each hit a cost event of 0 with its saving, in the summary and the exports."""

from __future__ import annotations

import csv
import io
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
import redis

from gateway.cli import main
from tests.e2e.processes import gateway_process
from tests.e2e.test_messages_e2e import ADMIN, config_for
from tests.factories import write_config

pytestmark = pytest.mark.e2e


class Deployment:
    def __init__(self, url: str, redis_url: str, config: Path, tenant: str, key: str) -> None:
        self.url, self.redis_url, self.config, self.tenant, self.key = url, redis_url, config, tenant, key
        self.redis = redis.Redis.from_url(redis_url)

    def openai(self) -> openai.OpenAI:
        return openai.OpenAI(base_url=f"{self.url}/v1", api_key=self.key, max_retries=0)

    def anthropic(self) -> anthropic.Anthropic:
        return anthropic.Anthropic(base_url=self.url, api_key=self.key, max_retries=0)

    def stored(self, count: int) -> int:
        """The tenant's stored answers, once there are ``count`` (they are written in the background)."""
        deadline = time.monotonic() + 15
        while True:
            found = int(self.redis.zcard(f"gw:{{{self.tenant}}}:rcache-index"))
            if found >= count or time.monotonic() > deadline:
                return found
            time.sleep(0.05)

    def events(self, count: int) -> dict[str, dict[str, Any]]:
        """The tenant's cost events by id, once there are ``count``."""
        deadline = time.monotonic() + 15
        while True:
            answer = httpx.get(
                f"{self.url}/admin/costs", params={"tenant": self.tenant, "format": "ndjson"}, headers=ADMIN
            )
            answer.raise_for_status()
            events = [orjson.loads(line) for line in answer.text.splitlines() if line.strip()]
            if len(events) >= count or time.monotonic() > deadline:
                return {event["id"]: event for event in events}
            time.sleep(0.1)


@pytest.fixture(scope="module")
def deployment(
    tmp_path_factory: pytest.TempPathFactory, mock_url: str, redis_url: str
) -> Iterator[Deployment]:
    directory = tmp_path_factory.mktemp("response-cache-e2e")
    suffix = uuid.uuid4().hex[:8]  # a fresh tenant: nothing stored by an earlier run
    tenant, key = f"cached-{suffix}", f"sk-cached-{suffix}"
    config = config_for(mock_url, {})
    config["tenants"] = {tenant: {"keys": [key], "response_cache": {"ttl_seconds": 600}}}
    path = write_config(directory / "gateway.yaml", config)
    with gateway_process(path, redis_url, directory) as url:
        deployment = Deployment(url, redis_url, path, tenant, key)
        yield deployment
        deployment.redis.close()


def upstream_calls(mock: httpx.Client, path: str) -> int:
    return sum(1 for seen in mock.get("/_requests").json()["requests"] if seen["path"] == path)


def test_chat_answered_from_the_cache_whole_and_streamed_without_an_upstream_call(
    deployment: Deployment, mock: httpx.Client, capsys: pytest.CaptureFixture[str]
) -> None:
    client = deployment.openai()
    messages: Any = [{"role": "user", "content": f"What is the capital of France? {uuid.uuid4().hex}"}]
    first = client.chat.completions.with_raw_response.create(
        model="gpt-5.4", messages=messages, temperature=0
    )
    assert first.headers["x-gateway-cache"] == "miss"
    assert deployment.stored(1) == 1
    second = client.chat.completions.with_raw_response.create(
        model="gpt-5.4", messages=messages, temperature=0, user="someone-else"
    )
    assert second.headers["x-gateway-cache"] == "hit"
    assert second.headers["x-gateway-cost-usd"] == "0.00"
    assert upstream_calls(mock, "/v1/chat/completions") == 1
    whole, again = first.parse(), second.parse()
    assert again.choices[0].message.content == whole.choices[0].message.content
    assert again.id == whole.id and again.usage == whole.usage

    stream = client.chat.completions.create(
        model="gpt-5.4",
        messages=messages,
        temperature=0,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    assert (
        "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        == whole.choices[0].message.content
    )
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].usage is not None and chunks[-1].usage.prompt_tokens == whole.usage.prompt_tokens  # type: ignore[union-attr]
    assert upstream_calls(mock, "/v1/chat/completions") == 1  # the stream never reached the mock either

    forwarded, hit = first.headers["x-gateway-request-id"], second.headers["x-gateway-request-id"]
    events = deployment.events(3)
    assert events[hit]["action"] == "cache_hit" and events[hit]["counterfactual_basis"] == "cache_hit"
    assert events[hit]["cost_usd"] == "0.000000000"
    assert events[hit]["counterfactual_usd"] == events[forwarded]["cost_usd"] == events[hit]["saving_usd"]
    assert events[forwarded]["cost_usd"] != "0.000000000"

    argv = ["costs", "summary", "--tenant", deployment.tenant, "--redis-url", deployment.redis_url,
            "--config", str(deployment.config), "--format", "json"]  # fmt: skip
    capsys.readouterr()
    assert main(argv) == 0
    [row] = orjson.loads(capsys.readouterr().out)
    assert row["requests"] >= 3 and row["saving_usd"] != "0.000000000"
    focus = httpx.get(
        f"{deployment.url}/admin/costs",
        params={"tenant": deployment.tenant, "format": "focus"},
        headers=ADMIN,
    )
    focus.raise_for_status()
    rows = [row for row in csv.DictReader(io.StringIO(focus.text)) if row["x_RequestId"] == hit]
    assert rows and rows[0]["x_Action"] == "cache_hit" and rows[0]["BilledCost"] in ("0", "0.000000000")
    assert rows[0]["x_SavingUSD"] == events[hit]["saving_usd"]


def test_messages_answered_from_the_cache_whole_and_streamed(
    deployment: Deployment, mock: httpx.Client
) -> None:
    client = deployment.anthropic()
    messages: Any = [{"role": "user", "content": f"Hello there {uuid.uuid4().hex}"}]
    first = client.messages.with_raw_response.create(
        model="claude-haiku-4-5", max_tokens=256, messages=messages
    )
    assert first.headers["x-gateway-cache"] == "miss"
    assert deployment.stored(2) >= 2
    second = client.messages.with_raw_response.create(
        model="claude-haiku-4-5",
        max_tokens=256,
        messages=messages,
        metadata={"user_id": "u-2"},
    )
    assert second.headers["x-gateway-cache"] == "hit"
    assert second.headers["request-id"] == second.headers["x-gateway-request-id"]
    whole, again = first.parse(), second.parse()
    assert again.content == whole.content and again.usage.input_tokens == whole.usage.input_tokens
    with client.messages.stream(model="claude-haiku-4-5", max_tokens=256, messages=messages) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == "".join(block.text for block in whole.content if block.type == "text")
    assert [block.model_dump(exclude={"parsed_output"}) for block in final.content] == [
        block.model_dump() for block in whole.content
    ]
    assert final.stop_reason == whole.stop_reason
    assert final.usage.output_tokens == whole.usage.output_tokens
    assert upstream_calls(mock, "/v1/messages") == 1

    hit = second.headers["x-gateway-request-id"]
    event = deployment.events(6)[hit]
    assert event["action"] == "cache_hit" and event["cost_usd"] == "0.000000000"
    assert event["saving_usd"] != "0.000000000"


def test_responses_answered_from_the_cache_whole_and_streamed(
    deployment: Deployment, mock: httpx.Client
) -> None:
    client = deployment.openai()
    prompt = f"Say hello {uuid.uuid4().hex}"
    before = deployment.stored(0)
    first = client.responses.with_raw_response.create(model="gpt-5.4", input=prompt)
    assert first.headers["x-gateway-cache"] == "miss"
    assert deployment.stored(before + 1) == before + 1
    second = client.responses.with_raw_response.create(model="gpt-5.4", input=prompt, user="another")
    assert second.headers["x-gateway-cache"] == "hit"
    whole, again = first.parse(), second.parse()
    assert again.output_text == whole.output_text and again.id == whole.id
    with client.responses.stream(model="gpt-5.4", input=prompt) as stream:
        deltas = "".join(event.delta for event in stream if event.type == "response.output_text.delta")
        final = stream.get_final_response()
    assert deltas == whole.output_text == final.output_text
    assert upstream_calls(mock, "/v1/responses") == 1
