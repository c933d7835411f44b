"""Cost attribution tags through a real gateway process and the mock upstreams: the openai SDK's
``extra_headers`` and ``metadata`` on chat completions and Responses (the header on embeddings), the
anthropic SDK's header on Messages, a key's default tags, each API's own 400 for a malformed header, and
the events read back from the ledger and summarised with ``gateway costs summary --group-by tag:team``."""

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

from gateway.cli import main
from tests.e2e.processes import gateway_process
from tests.e2e.test_messages_e2e import ADMIN, config_for
from tests.factories import write_config

pytestmark = pytest.mark.e2e


class Deployment:
    def __init__(self, url: str, redis_url: str, config: Path, tenant: str, keys: dict[str, str]) -> None:
        self.url, self.redis_url, self.config, self.tenant, self.keys = url, redis_url, config, tenant, keys

    def openai(self, who: str) -> openai.OpenAI:
        return openai.OpenAI(base_url=f"{self.url}/v1", api_key=self.keys[who], max_retries=0)

    def anthropic(self, who: str) -> anthropic.Anthropic:
        return anthropic.Anthropic(base_url=self.url, api_key=self.keys[who], max_retries=0)

    def events(self, count: int) -> list[dict[str, Any]]:
        """The tenant's cost events once there are ``count`` (written in the background), oldest first."""
        deadline = time.monotonic() + 15
        while True:
            answer = httpx.get(
                f"{self.url}/admin/costs", params={"tenant": self.tenant, "format": "ndjson"}, headers=ADMIN
            )
            answer.raise_for_status()
            events = [orjson.loads(line) for line in answer.text.splitlines() if line.strip()]
            if len(events) >= count or time.monotonic() > deadline:
                return events
            time.sleep(0.1)


@pytest.fixture(scope="module")
def deployment(
    tmp_path_factory: pytest.TempPathFactory, mock_url: str, redis_url: str
) -> Iterator[Deployment]:
    directory = tmp_path_factory.mktemp("tags-e2e")
    suffix = uuid.uuid4().hex[:8]  # a fresh tenant: no events of an earlier run
    tenant = f"tagged-{suffix}"
    keys = {"plain": f"sk-plain-{suffix}", "search": f"sk-search-{suffix}"}
    config = config_for(mock_url, {})
    config["tenants"] = {
        tenant: {
            "tags": {"env": "test"},
            "keys": [keys["plain"], {"key": keys["search"], "tags": {"team": "search"}}],
        }
    }
    path = write_config(directory / "gateway.yaml", config)
    with gateway_process(path, redis_url, directory) as url:
        yield Deployment(url, redis_url, path, tenant, keys)


def test_tags_from_the_sdks_reach_the_ledger_and_its_summary(
    deployment: Deployment, mock: httpx.Client, capsys: pytest.CaptureFixture[str]
) -> None:
    chat = deployment.openai("plain").chat.completions.with_raw_response.create(
        model="gpt-5.4",
        messages=[{"role": "user", "content": "Hello"}],
        extra_headers={"x-gateway-tags": "team=ads, feature=banner"},
        metadata={"feature": "overridden", "customer": "c-42"},
    )
    responses = deployment.openai("search").responses.with_raw_response.create(
        model="gpt-5.4", input="Hello", metadata={"feature": "autocomplete"}
    )
    message = deployment.anthropic("search").messages.with_raw_response.create(
        model="claude-haiku-4-5",
        max_tokens=64,
        messages=[{"role": "user", "content": "Hello"}],
        extra_headers={"x-gateway-tags": "team=ranking"},
        metadata={"user_id": "u-1"},
    )
    untagged = deployment.openai("plain").chat.completions.with_raw_response.create(
        model="gpt-5.4", messages=[{"role": "user", "content": "Hello"}]
    )
    embedded = deployment.openai("plain").embeddings.with_raw_response.create(
        model="text-embedding-3-small", input=["Hello"], extra_headers={"x-gateway-tags": "team=ml"}
    )
    answers = (chat, responses, message, untagged, embedded)
    ids = [raw.headers["x-gateway-request-id"] for raw in answers]
    sent = [r for r in mock.get("/_requests").json()["requests"] if r["path"] == "/v1/chat/completions"]
    assert sent[0]["body"]["metadata"] == {"feature": "overridden", "customer": "c-42"}  # forwarded unchanged
    events = {event["id"]: event for event in deployment.events(5)}
    assert [events[rid]["tags"] for rid in ids] == [
        {"env": "test", "team": "ads", "feature": "banner", "customer": "c-42"},
        {"env": "test", "team": "search", "feature": "autocomplete"},
        {"env": "test", "team": "ranking"},
        {"env": "test"},
        {"env": "test", "team": "ml"},
    ]

    argv = ["costs", "summary", "--tenant", deployment.tenant, "--redis-url", deployment.redis_url,
            "--config", str(deployment.config), "--group-by", "tag:team", "--format", "json"]  # fmt: skip
    capsys.readouterr()
    assert main(argv) == 0
    rows = {row["tag:team"]: row for row in orjson.loads(capsys.readouterr().out)}
    requests = {key: row["requests"] for key, row in rows.items()}
    assert requests == {"ads": 1, "search": 1, "ranking": 1, "ml": 1, "": 1}
    assert rows["ranking"]["cost_usd"] == events[ids[2]]["cost_usd"]


def test_a_malformed_header_is_a_400_in_each_apis_shape(deployment: Deployment) -> None:
    with pytest.raises(openai.BadRequestError) as chat:
        deployment.openai("plain").chat.completions.create(
            model="gpt-5.4",
            messages=[{"role": "user", "content": "Hello"}],
            extra_headers={"x-gateway-tags": "team"},
        )
    assert chat.value.code == "invalid_tags"
    assert chat.value.body == {
        "message": "Invalid x-gateway-tags header: 'team' is not key=value.",
        "type": "invalid_request_error",
        "param": "x-gateway-tags",
        "code": "invalid_tags",
    }
    with pytest.raises(openai.BadRequestError) as responses:
        deployment.openai("plain").responses.create(model="gpt-5.4", input="Hello", metadata={"team/x": "a"})
    assert responses.value.code == "invalid_tags" and "team/x" in responses.value.message
    with pytest.raises(anthropic.BadRequestError) as messages:
        deployment.anthropic("plain").messages.create(
            model="claude-haiku-4-5",
            max_tokens=64,
            messages=[{"role": "user", "content": "Hello"}],
            extra_headers={"x-gateway-tags": "team=" + "x" * 300},
        )
    body = messages.value.body
    assert isinstance(body, dict) and body["type"] == "error"
    assert body["error"]["type"] == "invalid_request_error"
    assert "tag 'team' has a value 300 characters long (at most 256)" in body["error"]["message"]
