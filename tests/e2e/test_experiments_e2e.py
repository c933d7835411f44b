"""Experiments end to end: ``gateway serve`` and the mock upstream as processes, the official openai SDK as
the client, the ledger, pairs and counters in a real Redis.

The mock answers the primary models (``gpt-5.4`` upstream) as always and the candidate, ``cand-mini``, as
another model would (``tests.mock.behaviours``): slower as the prompt grows, in fewer words, and from
2,000 prompt tokens on calling another tool than the first one offered. The sampling buckets are small
(0-2K, 2K-8K, 8K-32K, 32K+), so a prompt of a few thousand tokens is "long". Each experiment watches a
primary model of its own, so the tests share one gateway; a test that reloads the config puts the shared
one back when it ends. Shadow work runs after the response and the tally reaches Redis every 2 s, so what
is read back is polled for with a deadline.
"""

from __future__ import annotations

import copy
import os
import re
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any, TypeVar

import httpx
import openai
import orjson
import pytest
import redis
import yaml

from gateway.base.money import usd
from gateway.base.types import Usage
from gateway.config.schema.root import ModelPricing
from gateway.money.pricing import price
from tests.e2e.processes import gateway_process
from tests.fixtures.haystack import ProseGenerator

pytestmark = pytest.mark.e2e

T = TypeVar("T")

CANDIDATE = "cand-mini"
EDGES = [2000, 8000, 32000]
LONG_FROM = 2000
"""The low edge of the "long" bucket, and where the candidate starts choosing another tool."""
DELAY_PER_1K = 0.04
LEAST_LONG_DELAY_MS = DELAY_PER_1K * LONG_FROM
"""80 ms: the least the mock makes the candidate wait on a prompt of the long bucket."""
CANDIDATE_BEHAVIOUR = {
    "delay_per_1k_prompt_tokens": DELAY_PER_1K,
    "answer_words": 5,
    "tool_above_tokens": LONG_FROM,
    "tool_name": "grep",
}
PRIMARY_PRICE = {"input": "2.50", "cached_input": "0.25", "output": "15.00"}
CANDIDATE_PRICE = {"input": "0.25", "cached_input": "0.025", "output": "2.00"}
PURPOSES = ("report", "bytes", "budget", "split", "failing", "excluded", "billing")
KEYS = {
    "acme": "sk-exp-acme-key",
    "health": "sk-exp-health-key",  # tenants.<name>.experiments: false
    "globex": "sk-exp-globex-key",  # in the excluded experiment's match.exclude_tenants
    "thrifty": "sk-exp-thrifty-key",  # given a budget by the billing test
}
ADMIN = {"authorization": "Bearer admin-e2e"}
PARAMETERS = {"type": "object", "properties": {"pattern": {"type": "string"}}}
CHAT_TOOLS = [
    {"type": "function", "function": {"name": name, "parameters": PARAMETERS}} for name in ("search", "grep")
]
RESPONSES_TOOLS = [
    {"type": "function", "name": name, "parameters": PARAMETERS} for name in ("search", "grep")
]


# --- the gateway under test ---------------------------------------------------------------------------


def lab_config(mock_url: str, suffix: str) -> dict[str, Any]:
    model = {"provider": "mock", "encoding": "o200k_base", "max_output_tokens": 1000}
    models: dict[str, Any] = {
        CANDIDATE: {**model, "context_window": 400_000, "pricing": CANDIDATE_PRICE},
        **{
            f"main-{purpose}": {
                **model,
                "upstream_model": "gpt-5.4",
                "context_window": 1_050_000,
                "pricing": PRIMARY_PRICE,
            }
            for purpose in PURPOSES
        },
    }
    shadow = {
        "mode": "shadow",
        "candidate": CANDIDATE,
        "sample_rate": 1.0,
        "budget_usd_per_day": "5",
        "max_concurrency": 32,
    }
    experiments: dict[str, Any] = {
        f"{purpose}-{suffix}": {**shadow, "primary": [f"main-{purpose}"]} for purpose in PURPOSES
    }
    experiments[f"budget-{suffix}"]["budget_usd_per_day"] = "0.0001"
    experiments[f"excluded-{suffix}"]["match"] = {"exclude_tenants": [f"globex-{suffix}"]}
    experiments[f"split-{suffix}"] = {
        "mode": "split",
        "primary": ["main-split"],
        "candidate": CANDIDATE,
        "sample_rate": 0.5,
    }
    tenants: dict[str, Any] = {f"{who}-{suffix}": {"keys": [key]} for who, key in KEYS.items()}
    tenants[f"health-{suffix}"]["experiments"] = False
    return {
        "providers": {
            "mock": {
                "base_url": f"{mock_url}/v1",
                "api_key": "sk-upstream",
                "retry": {
                    "attempts": 2,
                    "backoff_initial": 0.001,
                    "backoff_max": 0.01,
                    "retry_after_cap": 0.05,
                },
            }
        },
        "models": models,
        "tenants": tenants,
        "sampling": {"buckets": EDGES},
        "limits": {"shadow_calls": 64},
        "experiments": experiments,
    }


@dataclass
class Lab:
    url: str
    path: Path
    redis_url: str
    suffix: str
    base: dict[str, Any]

    def name(self, purpose: str) -> str:
        return f"{purpose}-{self.suffix}"

    def tenant(self, who: str) -> str:
        return f"{who}-{self.suffix}"

    def sdk(self, who: str = "acme") -> openai.OpenAI:
        return openai.OpenAI(base_url=f"{self.url}/v1", api_key=KEYS[who], max_retries=0)

    def config(self) -> dict[str, Any]:
        """A copy of the shared config, to change and ``reconfigure`` with."""
        return copy.deepcopy(self.base)

    def admin(self, path: str, **params: str) -> httpx.Response:
        return httpx.get(f"{self.url}{path}", params=params, headers=ADMIN, timeout=10)

    def reconfigure(self, config: dict[str, Any]) -> None:
        """Write the config file again (atomically) and wait until the gateway's watcher has reloaded it."""
        before = self.admin("/admin/config").json()
        written = self.path.with_suffix(".next")
        written.write_text(yaml.safe_dump(config, sort_keys=False))
        os.replace(written, self.path)

        def reloaded() -> bool:
            now = self.admin("/admin/config").json()
            assert now["reload_failures"] == before["reload_failures"], f"rejected: {now['last_error']}"
            return bool(now["reloads"] > before["reloads"])

        wait_for(reloaded, "the gateway reloading its config file")

    def restore(self) -> None:
        self.reconfigure(self.base)

    def report(self, purpose: str, ready: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        """The experiment's report (``GET /admin/experiments/{name}/report``) once ``ready`` holds for it."""
        path = f"/admin/experiments/{self.name(purpose)}/report"

        def check() -> dict[str, Any] | None:
            answer = self.admin(path)
            assert answer.status_code == 200, answer.text
            document: dict[str, Any] = answer.json()
            return document if ready(document) else None

        return wait_for(check, f"the report of {self.name(purpose)} being ready")

    def pairs(self, purpose: str) -> list[dict[str, Any]]:
        """The experiment's pairs, read from Redis (``gw:{experiment:<name>}:pairs``)."""
        client = redis.Redis.from_url(self.redis_url)
        try:
            entries = client.xrange(f"gw:{{experiment:{self.name(purpose)}}}:pairs")
        finally:
            client.close()
        return [orjson.loads(fields[b"pair"]) for _, fields in entries]

    def costs(self, tenant: str) -> list[dict[str, Any]]:
        """The tenant's cost events (``GET /admin/costs``, NDJSON)."""
        answer = self.admin("/admin/costs", tenant=tenant, format="ndjson")
        assert answer.status_code == 200, answer.text
        return [orjson.loads(line) for line in answer.text.splitlines() if line]


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory, mock_url: str, redis_url: str) -> Iterator[Lab]:
    suffix = uuid.uuid4().hex[:8]
    directory = tmp_path_factory.mktemp("experiments")
    config = lab_config(mock_url, suffix)
    path = directory / "gateway.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    with gateway_process(path, redis_url, directory, extra_env={"GATEWAY_RELOAD_INTERVAL": "0.2"}) as url:
        yield Lab(url=url, path=path, redis_url=redis_url, suffix=suffix, base=config)


# --- requests and what came back -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Sent:
    """One request as the client saw it: the raw body and the headers."""

    body: bytes
    headers: dict[str, str]

    @property
    def request_id(self) -> str:
        return self.headers["x-gateway-request-id"]

    @property
    def prompt_tokens(self) -> int:
        return int(self.headers["x-gateway-prompt-tokens"])

    @property
    def model(self) -> str | None:
        return self.headers.get("x-gateway-model")

    @property
    def experiment(self) -> str | None:
        return self.headers.get("x-gateway-experiment")

    def json(self) -> dict[str, Any]:
        found: dict[str, Any] = orjson.loads(self.body)
        return found


def sent(headers: httpx.Headers, body: bytes) -> Sent:
    return Sent(body, {name.lower(): value for name, value in headers.items()})


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def chat(
    client: openai.OpenAI,
    model: str,
    messages: list[dict[str, Any]],
    *,
    stream: bool = False,
    tools: bool = False,
    max_tokens: int | None = None,
) -> Sent:
    options: dict[str, Any] = {"model": model, "messages": messages}
    if tools:
        options["tools"] = CHAT_TOOLS
    if max_tokens is not None:
        options["max_completion_tokens"] = max_tokens
    if stream:
        with client.chat.completions.with_streaming_response.create(stream=True, **options) as response:
            return sent(response.headers, b"".join(response.iter_bytes()))
    raw = client.chat.completions.with_raw_response.create(**options)
    return sent(raw.headers, raw.http_response.content)


def respond(
    client: openai.OpenAI, model: str, text: str, *, stream: bool = False, tools: bool = False
) -> Sent:
    options: dict[str, Any] = {"model": model, "input": text}
    if tools:
        options["tools"] = RESPONSES_TOOLS
    if stream:
        with client.responses.with_streaming_response.create(stream=True, **options) as response:
            return sent(response.headers, b"".join(response.iter_bytes()))
    raw = client.responses.with_raw_response.create(**options)
    return sent(raw.headers, raw.http_response.content)


Send = Callable[[openai.OpenAI, str, str], Sent]
EVERY_WAY: tuple[tuple[str, Send], ...] = (
    ("chat", lambda client, model, text: chat(client, model, [user(text)])),
    ("chat stream", lambda client, model, text: chat(client, model, [user(text)], stream=True)),
    ("responses", lambda client, model, text: respond(client, model, text)),
    ("responses stream", lambda client, model, text: respond(client, model, text, stream=True)),
    ("chat tools", lambda client, model, text: chat(client, model, [user(text)], tools=True)),
    (
        "chat tools stream",
        lambda client, model, text: chat(client, model, [user(text)], stream=True, tools=True),
    ),
    ("responses tools", lambda client, model, text: respond(client, model, text, tools=True)),
    (
        "responses tools stream",
        lambda client, model, text: respond(client, model, text, stream=True, tools=True),
    ),
)
"""Every kind of request a shadow copies: chat and Responses, streamed or not, text or tools."""


def prose(words: int, seed: int) -> str:
    generator = ProseGenerator(seed)
    sentences: list[str] = []
    while sum(len(sentence.split()) for sentence in sentences) < words:
        sentences.append(generator.sentence())
    return " ".join(sentences)


def new_tag() -> str:
    """A word only this test's prompts carry: the mock's log is shared by the whole session."""
    return f"tag{uuid.uuid4().hex[:10]}"


def behave(mock: httpx.Client, **models: dict[str, Any]) -> None:
    assert mock.post("/_control", json={"models": models}).status_code == 200


def candidate_calls(mock: httpx.Client, tag: str) -> list[dict[str, Any]]:
    """What the mock received for the candidate model from requests carrying ``tag``."""
    seen = mock.get("/_requests").json()["requests"]
    return [
        request["body"]
        for request in seen
        if request["body"].get("model") == CANDIDATE and tag in orjson.dumps(request["body"]).decode()
    ]


def wait_for(check: Callable[[], T | bool | None], what: str, timeout: float = 20.0) -> T:
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found is not None and found is not False:
            return found  # type: ignore[return-value]
        if time.monotonic() > deadline:
            raise AssertionError(f"not seen within {timeout} s: {what}")
        time.sleep(0.1)


def bucket(report: dict[str, Any], low: int) -> dict[str, Any]:
    [found] = [item for item in report["buckets"] if item["min_tokens"] == low]
    return found


def counter(report: dict[str, Any], name: str) -> int:
    return int(report["counters"].get(name, 0))


# --- shadow ----------------------------------------------------------------------------------------------


def test_the_report_shows_the_candidate_slower_terser_and_off_tool_only_where_prompts_are_long(
    lab: Lab, mock: httpx.Client
) -> None:
    behave(mock, **{CANDIDATE: CANDIDATE_BEHAVIOUR})
    client, tag = lab.sdk(), new_tag()
    sizes: dict[str, list[int]] = {"short": [], "long": []}
    for size, words in (("short", 40), ("long", 3000)):
        for index, (way, send) in enumerate(EVERY_WAY):
            answer = send(client, "main-report", f"{tag} {size} {way}: {prose(words, seed=index)}")
            sizes[size].append(answer.prompt_tokens)
    assert max(sizes["short"]) < LONG_FROM <= min(sizes["long"]) and max(sizes["long"]) < EDGES[1], sizes
    ways = len(EVERY_WAY)

    report = lab.report("report", lambda document: document["pairs"] >= 2 * ways)
    assert report["pairs"] == 2 * ways and counter(report, "shadowed") == 2 * ways
    assert len(candidate_calls(mock, tag)) == 2 * ways  # one candidate call per request, none retried
    short, long = bucket(report, 0), bucket(report, LONG_FROM)
    assert short["pairs"] == long["pairs"] == ways

    # latency: the candidate is slower only on long prompts (it waits at least 80 ms there, ~2 ms on short)
    assert long["candidate"]["latency_ms"]["p10"] >= LEAST_LONG_DELAY_MS
    assert long["candidate"]["latency_ms"]["p10"] > long["primary"]["latency_ms"]["p50"]
    assert long["candidate"]["ttft_ms"]["p10"] >= LEAST_LONG_DELAY_MS  # streams wait before their first byte
    assert short["candidate"]["latency_ms"]["p50"] < LEAST_LONG_DELAY_MS
    # output: the candidate answers in fewer words everywhere (tool calls are the same size)
    for found in (short, long):
        assert found["candidate"]["output_tokens"]["p50"] < found["primary"]["output_tokens"]["p50"]
        assert found["candidate"]["output_tokens"]["p90"] < found["primary"]["output_tokens"]["p90"]
        assert Decimal(found["candidate"]["cost_usd"]) < Decimal(found["primary"]["cost_usd"])
    text_pairs = [pair for pair in lab.pairs("report") if not pair["tools"]]
    assert len(text_pairs) == ways
    assert all(pair["candidate"]["output_tokens"] < pair["primary"]["output_tokens"] for pair in text_pairs)
    assert all(pair["agreement"]["kind"] == "text" and pair["agreement"]["score"] < 1 for pair in text_pairs)
    # tools: the same tool and arguments below 2,000 tokens, another tool above
    tools = ways // 2
    assert short["agreement"]["tool_pairs"] == tools and short["agreement"]["same_tool_share"] == 1.0
    assert short["agreement"]["same_args_share"] == 1.0
    assert long["agreement"]["tool_pairs"] == tools and long["agreement"]["same_tool"] == 0
    assert long["agreement"]["same_tool_share"] == 0.0


def test_the_client_gets_the_same_bytes_with_and_without_the_experiment(lab: Lab, mock: httpx.Client) -> None:
    tag = new_tag()
    client = lab.sdk()
    text = f"{tag}: {prose(60, seed=3)}"
    ways = EVERY_WAY[:4] + EVERY_WAY[-1:]

    def run() -> list[Sent]:
        behave(mock, **{CANDIDATE: CANDIDATE_BEHAVIOUR})
        return [send(client, "main-bytes", text) for _, send in ways]

    mirrored = run()
    ids = {answer.request_id for answer in mirrored}
    wait_for(lambda: ids <= {pair["id"] for pair in lab.pairs("bytes")}, "a pair for every request")
    assert len(candidate_calls(mock, tag)) == len(ways)  # the experiment did copy every one of them
    mock.post("/_reset")  # the upstream as it was before the first run: no stored responses, no cache
    config = lab.config()
    del config["experiments"][lab.name("bytes")]
    lab.reconfigure(config)
    try:
        plain = run()
    finally:
        lab.restore()
    assert candidate_calls(mock, tag) == []

    def masked(body: bytes) -> bytes:
        """Without what differs from one call to the next: the time, and the mock's response ids."""
        body = re.sub(rb'"(created|created_at)":\d+', rb'"\1":0', body)
        return re.sub(rb"resp_mock_(\d+)_\d+", rb"resp_mock_\1", body)

    def same(headers: dict[str, str]) -> dict[str, str]:
        return {
            name: value
            for name, value in headers.items()
            if (name.startswith("x-") or name == "content-type")
            and name not in ("x-gateway-request-id", "x-request-id")
        }

    for (way, _), with_it, without in zip(ways, mirrored, plain, strict=True):
        assert masked(with_it.body) == masked(without.body), way
        assert same(with_it.headers) == same(without.headers), way
        assert "x-gateway-experiment" not in with_it.headers, way


def test_a_spent_budget_stops_shadowing(lab: Lab, mock: httpx.Client) -> None:
    behave(mock, **{CANDIDATE: CANDIDATE_BEHAVIOUR})
    client, tag = lab.sdk(), new_tag()
    # each candidate copy is held at ~60 input tokens and 8 output tokens: ~$0.00003 of a $0.0001 budget
    for index in range(6):
        chat(client, "main-budget", [user(f"{tag} question {index}: {prose(40, seed=index)}")], max_tokens=8)

    def settled(document: dict[str, Any]) -> bool:
        return counter(document, "shadowed") + counter(document, "over_budget") >= 6

    report = lab.report("budget", settled)
    called = candidate_calls(mock, tag)
    assert 1 <= len(called) < 6, f"{len(called)} of 6 copies reached the candidate"
    assert counter(report, "shadowed") == len(called)
    assert counter(report, "over_budget") == 6 - len(called)
    assert 0 < Decimal(report["budget"]["spent_today_usd"]) <= Decimal("0.0001")

    for index in range(6, 10):  # the budget is spent: no copy even reaches the mock any more
        chat(client, "main-budget", [user(f"{tag} question {index}: {prose(40, seed=index)}")], max_tokens=8)
    report = lab.report("budget", lambda document: counter(document, "over_budget") >= 10 - len(called))
    assert counter(report, "over_budget") == 10 - len(called)
    assert counter(report, "shadowed") == len(called)
    assert candidate_calls(mock, tag) == called


def test_a_failing_candidate_never_fails_a_request(lab: Lab, mock: httpx.Client) -> None:
    behave(mock, **{CANDIDATE: {"fail_status": 500}})
    client, tag = lab.sdk(), new_tag()
    answers = [send(client, "main-failing", f"{tag} {way}: {prose(40, seed=1)}") for way, send in EVERY_WAY]
    # the SDK raises on any error status: every request was answered, with the primary's answer
    assert {answer.model for answer in answers} == {"main-failing"}
    assert answers[0].json()["choices"][0]["message"]["content"].startswith(f"echo: {tag} chat:")
    streamed = [answer for (way, _), answer in zip(EVERY_WAY, answers, strict=True) if "stream" in way]
    assert all(b"[DONE]" in answer.body or b"response.completed" in answer.body for answer in streamed)

    def settled(document: dict[str, Any]) -> bool:  # counters are written before the pairs they count
        return counter(document, "failed") >= len(EVERY_WAY) and document["pairs"] >= len(EVERY_WAY)

    report = lab.report("failing", settled)
    assert counter(report, "failed") == len(EVERY_WAY) and counter(report, "shadowed") == 0
    assert len(candidate_calls(mock, tag)) == len(EVERY_WAY)  # each copy tried once, never retried
    short = bucket(report, 0)
    assert short["candidate"]["error_rate"] == 1.0 and short["primary"]["error_rate"] == 0.0
    pairs = [pair for pair in lab.pairs("failing") if pair["id"] in {a.request_id for a in answers}]
    assert len(pairs) == len(EVERY_WAY)
    assert all(pair["candidate"]["status"] == 500 and pair["candidate"]["error"] for pair in pairs)
    assert all(pair["primary"]["error"] is None and pair["agreement"] is None for pair in pairs)


def test_an_excluded_tenant_is_never_mirrored_nor_split(lab: Lab, mock: httpx.Client) -> None:
    tag = new_tag()
    for who in ("health", "globex"):  # experiments: false / match.exclude_tenants
        client = lab.sdk(who)
        for way, send in EVERY_WAY[:4]:
            send(client, "main-excluded", f"{tag} {who} {way}: {prose(40, seed=2)}")
    control = chat(lab.sdk(), "main-excluded", [user(f"{tag} acme control: {prose(40, seed=2)}")])

    def settled(document: dict[str, Any]) -> bool:
        shadowed = counter(document, "shadowed") >= 1 and document["pairs"] >= 1
        return shadowed and counter(document, "excluded") >= 4

    report = lab.report("excluded", settled)
    assert counter(report, "shadowed") == 1 and counter(report, "excluded") == 4  # health's requests
    [copied] = candidate_calls(mock, tag)
    assert "acme control" in orjson.dumps(copied).decode()
    assert [pair["id"] for pair in lab.pairs("excluded")] == [control.request_id]

    # the split experiment never sends the excluded tenant to the candidate, while it does send others
    health = lab.sdk("health")
    for index in range(8):
        answer = chat(health, "main-split", [user(f"{tag} health conversation {index}")])
        assert answer.model == "main-split" and answer.experiment is None
    acme = lab.sdk()
    routed = [chat(acme, "main-split", [user(f"{tag} acme conversation {index}")]) for index in range(30)]
    assert {answer.model for answer in routed} == {"main-split", CANDIDATE}
    assert all(answer.experiment is not None for answer in routed)


def test_shadow_spend_never_touches_the_tenants_budget_or_usage(lab: Lab, mock: httpx.Client) -> None:
    name, thrifty = lab.name("billing"), lab.tenant("thrifty")
    messages = [user(f"{new_tag()}: {prose(50, seed=4)}")]
    cap, count = 5, 6
    probe = chat(lab.sdk(), "main-billing", messages, max_tokens=cap)  # another tenant: what one costs
    usage = probe.json()["usage"]
    assert usage["completion_tokens"] == cap and usage["prompt_tokens_details"]["cached_tokens"] == 0
    tokens = Usage(input_tokens=usage["prompt_tokens"], output_tokens=cap)
    primary = price(tokens, ModelPricing.model_validate(PRIMARY_PRICE)).total_nanos
    shadow = price(tokens, ModelPricing.model_validate(CANDIDATE_PRICE)).total_nanos
    # every primary call fits (each is held at exactly its cost); billed with their shadows, the last
    # request would be refused
    budget = count * primary + (count - 1) * shadow // 2
    assert (count - 1) * (primary + shadow) + primary > budget
    config = lab.config()
    config["tenants"][thrifty]["budget"] = {"daily_usd": usd(budget)}
    lab.reconfigure(config)
    try:
        client = lab.sdk("thrifty")
        answers = [chat(client, "main-billing", messages, max_tokens=cap) for _ in range(count)]  # none 429
        ids = {answer.request_id for answer in answers}

        def shadowed() -> list[dict[str, Any]] | None:
            found = [event for event in lab.costs(f"experiment:{name}") if event["parent_id"] in ids]
            return found if len(found) >= count else None

        events = wait_for(shadowed, "a shadow cost event for every request")

        def used() -> dict[str, Any] | None:
            answer = httpx.get(
                f"{lab.url}/v1/gateway/usage", headers={"authorization": f"Bearer {KEYS['thrifty']}"}
            )
            found: dict[str, Any] = answer.json()
            return found if found["day"]["requests"] >= count else None

        spent = wait_for(used, "the tenant's usage counting every request")
    finally:
        lab.restore()

    assert spent["tenant"] == thrifty
    assert spent["day"]["requests"] == count and spent["day"]["cost_usd"] == usd(count * primary)
    assert spent["day"]["budget_usd"] == usd(budget) and spent["reserved_usd"] == usd(0)
    own = lab.costs(thrifty)
    assert sorted(event["id"] for event in own) == sorted(ids)
    assert {(event["model"], event["action"]) for event in own} == {("main-billing", "forward")}
    assert len(events) == count
    assert {(e["tenant"], e["action"], e["model"]) for e in events} == {
        (f"experiment:{name}", "shadow", CANDIDATE)
    }
    assert sum(Decimal(event["cost_usd"]) for event in events) == Decimal(usd(count * shadow))


# --- split -----------------------------------------------------------------------------------------------


@dataclass
class Conversation:
    """A chat whose client resends its whole history each turn."""

    opening: str
    messages: list[dict[str, Any]] = field(default_factory=list)
    models: list[str | None] = field(default_factory=list)

    def turn(self, client: openai.OpenAI) -> Sent:
        text = self.opening if not self.messages else f"Turn {len(self.models)}: and what next?"
        self.messages.append(user(text))
        answer = chat(client, "main-split", self.messages)
        self.messages.append(
            {"role": "assistant", "content": answer.json()["choices"][0]["message"]["content"]}
        )
        self.models.append(answer.model)
        return answer

    @property
    def model(self) -> str | None:
        return self.models[0]


def test_a_split_keeps_every_conversation_on_one_model_through_a_rollback(
    lab: Lab, mock: httpx.Client
) -> None:
    name, tag = lab.name("split"), new_tag()
    client = lab.sdk()

    def arm(answer: Sent) -> str:
        """The arm the response names, checked against the model that answered."""
        assert answer.model in ("main-split", CANDIDATE), answer.headers
        expected = "candidate" if answer.model == CANDIDATE else "primary"
        assert answer.experiment == f"{name}; arm={expected}", answer.headers
        return expected

    started: list[Conversation] = []
    while len(started) < 40:
        conversation = Conversation(
            f"{tag} conversation {len(started)}: plan a trip to {prose(12, len(started))}"
        )
        for _ in range(3):
            arm(conversation.turn(client))
        started.append(conversation)
        arms = [conversation.model == CANDIDATE for conversation in started]
        if len(started) >= 6 and 2 <= sum(arms) <= len(started) - 2:
            break
    assert all(len(set(conversation.models)) == 1 for conversation in started), [c.models for c in started]
    on_candidate = [conversation for conversation in started if conversation.model == CANDIDATE]
    assert 2 <= len(on_candidate) <= len(started) - 2, "a 50% split sent (nearly) every conversation one way"
    assert len(candidate_calls(mock, tag)) == 3 * len(on_candidate)  # the header tells the truth

    config = lab.config()
    config["experiments"][name]["sample_rate"] = 0
    lab.reconfigure(config)
    try:
        for conversation in started:  # started on the candidate: they finish there
            assert arm(conversation.turn(client)) == (
                "candidate" if conversation in on_candidate else "primary"
            )
            assert len(set(conversation.models)) == 1, conversation.models
        for index in range(4):  # new conversations: the primary
            fresh = Conversation(f"{tag} later conversation {index}: {prose(12, 100 + index)}")
            assert [arm(fresh.turn(client)) for _ in range(2)] == ["primary", "primary"]

        config["experiments"][name]["force_back"] = True
        lab.reconfigure(config)
        for conversation in started:  # forced back: every one on the primary from now on
            assert arm(conversation.turn(client)) == "primary"
    finally:
        lab.restore()
    assert len(candidate_calls(mock, tag)) == 4 * len(on_candidate)
