"""Rate limits through a real gateway process (two workers) and the mock upstream, with the official SDKs:
the openai SDK retries a 429 by itself, waiting what ``retry-after-ms`` says, and then succeeds; the
anthropic SDK reads Anthropic's ``anthropic-ratelimit-*`` headers and raises its own ``RateLimitError``; and
hundreds of concurrent requests against a limit are admitted exactly up to it across both workers."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import anthropic
import httpx
import openai
import pytest

from tests.e2e.processes import gateway_process
from tests.e2e.test_messages_e2e import config_for
from tests.factories import write_config

pytestmark = pytest.mark.e2e

RETRY_PER_MINUTE = 20
"""The retrying key's limit: a request back every 3 s, so the second of two requests sent one after the
other is refused (unless 3 s pass between them) and its retry waits at most that."""
BURST_PER_MINUTE = 10
CONCURRENT = 300


@dataclass(frozen=True)
class Deployment:
    url: str
    keys: dict[str, str]


@pytest.fixture(scope="module")
def deployment(
    tmp_path_factory: pytest.TempPathFactory, mock_url: str, redis_url: str
) -> Iterator[Deployment]:
    directory = tmp_path_factory.mktemp("ratelimits-e2e")
    suffix = uuid.uuid4().hex[:8]  # fresh tenants: no counters of an earlier run
    keys = {who: f"sk-{who}-{suffix}" for who in ("retry", "claude", "burst", "free")}
    config = config_for(mock_url, {})
    config["tenants"] = {
        f"apps-{suffix}": {
            "keys": [
                {"key": keys["retry"], "rate_limits": {"requests_per_minute": RETRY_PER_MINUTE}},
                {
                    "key": keys["claude"],
                    "rate_limits": {"requests_per_minute": 2, "tokens_per_minute": 200_000},
                },
                keys["free"],
            ],
        },
        f"burst-{suffix}": {
            "keys": [keys["burst"]],
            "rate_limits": {"requests_per_minute": BURST_PER_MINUTE},
        },
    }
    path = write_config(directory / "gateway.yaml", config)
    with gateway_process(path, redis_url, directory, extra_env={"GATEWAY_WORKERS": "2"}) as url:
        yield Deployment(url, keys)


def chat(client: openai.OpenAI) -> openai.types.chat.ChatCompletion:
    return client.chat.completions.create(model="gpt-5.4", messages=[{"role": "user", "content": "Hello"}])


def test_ratelimits_openai_sdk_retries_a_429_by_itself_and_succeeds(deployment: Deployment) -> None:
    key = deployment.keys["retry"]
    no_retries = openai.OpenAI(base_url=f"{deployment.url}/v1", api_key=key, max_retries=0)
    first = no_retries.chat.completions.with_raw_response.create(
        model="gpt-5.4", messages=[{"role": "user", "content": "Hello"}]
    )
    assert first.headers["x-ratelimit-limit-requests"] == str(RETRY_PER_MINUTE)
    assert first.headers["x-ratelimit-remaining-requests"] == str(RETRY_PER_MINUTE - 1)
    # empty the key's counter: what is left goes (and what refills meanwhile), then one more is refused
    with pytest.raises(openai.RateLimitError) as refused:
        for _ in range(10 * RETRY_PER_MINUTE):
            chat(no_retries)
    assert refused.value.code == "rate_limit_exceeded"
    assert 0 < int(refused.value.response.headers["retry-after-ms"]) <= 60_000 // RETRY_PER_MINUTE

    retrying = openai.OpenAI(base_url=f"{deployment.url}/v1", api_key=key, max_retries=3)
    answer = retrying.chat.completions.with_raw_response.create(
        model="gpt-5.4", messages=[{"role": "user", "content": "Hello again"}]
    )
    assert answer.http_response.status_code == 200
    assert answer.retries_taken >= 1  # refused first, then admitted once the counter refilled
    assert answer.parse().choices[0].message.content
    assert answer.headers["x-ratelimit-remaining-requests"] == "0"


def test_ratelimits_anthropic_sdk_sees_its_own_headers_and_error(deployment: Deployment) -> None:
    client = anthropic.Anthropic(base_url=deployment.url, api_key=deployment.keys["claude"], max_retries=0)

    def create() -> anthropic.APIResponse[anthropic.types.Message]:
        return client.messages.with_raw_response.create(
            model="claude-sonnet-4-5", max_tokens=1_000, messages=[{"role": "user", "content": "Hello"}]
        )

    answers = [create(), create()]
    for number, answer in enumerate(answers):
        headers = answer.headers
        assert headers["anthropic-ratelimit-requests-limit"] == "2"
        assert headers["anthropic-ratelimit-requests-remaining"] == str(1 - number)
        assert headers["anthropic-ratelimit-requests-reset"].endswith("Z")
        assert headers["anthropic-ratelimit-tokens-limit"] == "200000"
        assert int(headers["anthropic-ratelimit-tokens-remaining"]) <= 200_000 - 1_000
        assert not any(name.startswith("x-ratelimit-") for name in headers)
        assert answer.parse().content
    with pytest.raises(anthropic.RateLimitError) as refused:
        create()
    assert refused.value.status_code == 429
    assert refused.value.body["error"]["type"] == "rate_limit_error"  # type: ignore[index]
    assert int(refused.value.response.headers["retry-after"]) >= 1
    assert refused.value.response.headers["anthropic-ratelimit-requests-remaining"] == "0"


def test_ratelimits_a_key_without_limits_is_not_counted(deployment: Deployment) -> None:
    client = openai.OpenAI(base_url=f"{deployment.url}/v1", api_key=deployment.keys["free"], max_retries=0)
    answer = client.chat.completions.with_raw_response.create(
        model="gpt-5.4", messages=[{"role": "user", "content": "Hello"}]
    )
    assert not any(name.startswith("x-ratelimit-") for name in answer.headers)


def test_ratelimits_concurrent_requests_are_admitted_up_to_the_limit(deployment: Deployment) -> None:
    """300 requests at once over two workers against 10 a minute: 10 admitted, plus what the counter
    refilled while they ran (one every 6 s, none in a run of a few seconds), never more."""

    async def burst() -> list[int]:
        client = openai.AsyncOpenAI(
            base_url=f"{deployment.url}/v1",
            api_key=deployment.keys["burst"],
            max_retries=0,
            http_client=httpx.AsyncClient(limits=httpx.Limits(max_connections=CONCURRENT)),
        )

        async def one() -> int:
            try:
                await client.chat.completions.create(
                    model="gpt-5.4", messages=[{"role": "user", "content": "Hello"}]
                )
            except openai.RateLimitError:
                return 429
            return 200

        async with client:
            return await asyncio.gather(*(one() for _ in range(CONCURRENT)))

    started = time.monotonic()
    statuses = asyncio.run(burst())
    elapsed = time.monotonic() - started
    refilled = int(elapsed * BURST_PER_MINUTE / 60)
    admitted = statuses.count(200)
    assert statuses.count(429) == CONCURRENT - admitted
    assert BURST_PER_MINUTE <= admitted <= BURST_PER_MINUTE + refilled
