"""Summary compression through the app: single flight, pre-compression, failures, tool pairs and cost.

The app runs with its lifespan, a real Redis and a unique tenant per test; respx plays the upstream.
Summaries are written by the cheap model ``small`` (upstream name ``gpt-5.4-mini``), so the mock tells
the main model's calls from the cheap model's by the model name in the body.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import redis.asyncio as aioredis
import respx
from fastapi import FastAPI
from starlette.types import Receive, Scope, Send

from gateway.base.record import RequestRecord
from gateway.cli import main
from gateway.config.runtime import Runtime, build_runtime
from gateway.config.schema.root import GatewayConfig, ProviderConfig
from gateway.config.settings import Settings
from gateway.core.front import TransformFailed
from gateway.core.transforms import CompressorTransforms
from gateway.edge.app import create_app
from gateway.ledger import CostEvent
from gateway.ledger.period import Period
from gateway.upstream.clients import UpstreamPool
from policies import Action, Facts
from tests.factories import (
    ADMIN_KEY,
    TENANT_KEY,
    UPSTREAM,
    completion,
    make_config,
    shared_counter,
    write_config,
)
from tests.fixtures.conversations import conversation, document_with_needle, tokens_of
from tests.fixtures.haystack import ProseGenerator

CHEAP_UPSTREAM = "gpt-5.4-mini"
SUMMARY = (
    "## User goal\nShip the report.\n## Confirmed conclusions\n- Q3 is done.\n## Open todos\n- Q4 numbers."
)
MALFORMED = "Sure! The user wants the report shipped and Q3 is done."
CHEAP_USAGE = {"prompt_tokens": 40_000, "completion_tokens": 600, "total_tokens": 40_600}
SUMMARY_MARK = "Summary of the earlier conversation"
ONE_CALL = {"chunk_tokens": 300_000}
"""The whole old part of a 255K conversation in one cheap-model call (the cheap model has 400K)."""


def compression_config(tenant: str, **compress: Any) -> dict[str, Any]:
    config = make_config(tenants={tenant: {"keys": [TENANT_KEY]}})
    config["models"]["small"]["pricing"] = {"input": "0.75", "cached_input": "0.075", "output": "4.50"}
    # eager: these tests are about the compression itself; tests/gateway/test_cache_timing.py defers
    config["policies"] = {
        "default": {"name": "default", "compress": {"cheap_model": "small", "timing": "eager", **compress}}
    }
    return config


class Upstream:
    """The main model answers "done"; the cheap model follows ``script`` (``good``, ``malformed`` or
    ``error``: HTTP 500), then ``default``. ``gate``, when set, is awaited before each cheap answer."""

    def __init__(self, *script: str, default: str = "good") -> None:
        self.main: list[dict[str, Any]] = []
        self.cheap: list[dict[str, Any]] = []
        self.script = list(script)
        self.default = default
        self.gate: Callable[[], Awaitable[None]] | None = None

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        body = orjson.loads(request.content)
        if body["model"] != CHEAP_UPSTREAM:
            self.main.append(body)
            return httpx.Response(200, json=completion("done"))
        self.cheap.append(body)
        if self.gate is not None:
            await self.gate()
        kind = self.script.pop(0) if self.script else self.default
        if kind == "error":
            return httpx.Response(500, json={"error": {"message": "overloaded", "type": "server_error"}})
        text = MALFORMED if kind == "malformed" else SUMMARY
        return httpx.Response(200, json=completion(text, model=CHEAP_UPSTREAM, usage=CHEAP_USAGE))


class Door:
    """The app behind a door that counts the requests inside it."""

    def __init__(self, app: FastAPI) -> None:
        self.app = app
        self.entered = 0
        self.left = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.entered += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.left += 1


@dataclass
class Served:
    app: FastAPI
    client: httpx.AsyncClient
    door: Door

    async def chat(self, messages: list[dict[str, Any]]) -> httpx.Response:
        return await self.client.post("/v1/chat/completions", json={"model": "gpt-5.4", "messages": messages})

    async def background_done(self, timeout: float = 30.0) -> None:
        background = self.app.state.gateway.pipeline.background
        await until(lambda: len(background) == 0, timeout)

    async def events(self, tenant: str, count: int, timeout: float = 10.0) -> list[CostEvent]:
        """The tenant's cost events, once the ledger writer has stored at least ``count``."""
        now = int(time.time() * 1000)
        period = Period(start_ms=now - 3_600_000, end_ms=now + 3_600_000)
        reader = self.app.state.gateway.reader
        found: list[CostEvent] = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = [event async for event in reader.events(tenant, period)]
            if len(found) >= count:
                break
            await asyncio.sleep(0.02)
        return found


async def until(condition: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError("condition not reached")
        await asyncio.sleep(0.01)


@asynccontextmanager
async def serving(
    tmp_path: Path, redis_url: str, upstream: Upstream, config: dict[str, Any]
) -> AsyncIterator[Served]:
    router = respx.Router(assert_all_called=False)
    router.post(f"{UPSTREAM}/chat/completions").mock(side_effect=upstream)
    tmp_path.mkdir(parents=True, exist_ok=True)
    settings = Settings(
        config=write_config(tmp_path / "gateway.yaml", config),
        redis_url=redis_url,
        admin_key=ADMIN_KEY,
        data_dir=tmp_path / "data",
    )

    def factory(provider: ProviderConfig) -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=httpx.MockTransport(router.async_handler))

    app = create_app(settings, client_factory=factory, counter=shared_counter())
    door = Door(app)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=door)
        headers = {"authorization": f"Bearer {TENANT_KEY}"}
        async with httpx.AsyncClient(
            transport=transport, base_url="http://gw", headers=headers, timeout=120
        ) as client:
            yield Served(app=app, client=client, door=door)


# --- conversations (built once per session; never mutated) -----------------------------------------


@functools.cache
def history(turns: int) -> list[dict[str, Any]]:
    """System prompt, ``turns`` alternating turns of ~980 tokens, a last user question."""
    return conversation(turns, words_per_turn=700)


def grown(messages: list[dict[str, Any]], tokens: int, *, seed: int = 99) -> list[dict[str, Any]]:
    """``messages`` followed by new turns (an answer first) until the request has ``tokens`` tokens."""
    prose = ProseGenerator(seed)
    more = [*messages, {"role": "assistant", "content": "done"}]
    while tokens_of(more) < tokens:
        text = " ".join(prose.sentence() for _ in range(50))
        more.append({"role": "user" if more[-1]["role"] == "assistant" else "assistant", "content": text})
    return [*more, {"role": "user", "content": "And what is left?"}]


@functools.cache
def tool_history(tokens: int) -> list[dict[str, Any]]:
    """Turns of: a user ask, an assistant tool call (two in parallel every third turn), the large tool
    results, the assistant's reading of them; then a last user question."""
    prose = ProseGenerator(23)
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a coding agent."}]
    step = 0
    while tokens_of(messages) < tokens:
        step += 1
        ids = [f"call_{step}_{n}" for n in range(2 if step % 3 == 0 else 1)]
        calls = [
            {"id": i, "type": "function", "function": {"name": "read_file", "arguments": f'{{"n": {step}}}'}}
            for i in ids
        ]
        messages.append({"role": "user", "content": f"Step {step}: " + prose.sentence()})
        messages.append({"role": "assistant", "content": None, "tool_calls": calls})
        for i in ids:
            messages.append(
                {"role": "tool", "tool_call_id": i, "content": " ".join(prose.sentence() for _ in range(90))}
            )
        messages.append({"role": "assistant", "content": " ".join(prose.sentence() for _ in range(12))})
    return [*messages, {"role": "user", "content": "Which files are still to change?"}]


def unpaired(messages: list[dict[str, Any]]) -> list[str]:
    """Every tool message must answer a call of the assistant message just before its run of tool
    messages, and every call must be answered there."""
    problems: list[str] = []
    for index, message in enumerate(messages):
        if message.get("role") == "tool":
            start = index
            while start > 0 and messages[start - 1].get("role") == "tool":
                start -= 1
            caller = messages[start - 1] if start > 0 else {}
            ids = {call["id"] for call in caller.get("tool_calls") or ()}
            if caller.get("role") != "assistant" or message.get("tool_call_id") not in ids:
                problems.append(f"tool message {index} ({message.get('tool_call_id')}) has no call before it")
        for call in message.get("tool_calls") or ():
            answers = []
            for after in messages[index + 1 :]:
                if after.get("role") != "tool":
                    break
                answers.append(after.get("tool_call_id"))
            if call["id"] not in answers:
                problems.append(f"call {call['id']} at {index} has no tool answer after it")
    return problems


def sent_summary(messages: list[dict[str, Any]]) -> bool:
    return any(SUMMARY_MARK in str(message.get("content")) for message in messages)


# --- single flight ----------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_compression_single_flight_under_twenty_concurrent_requests(
    tmp_path: Path, redis_url: str, tenant_name: str
) -> None:
    messages = history(260)
    assert 250_000 <= tokens_of(messages) < 272_000
    solo_tenant = f"{tenant_name}-solo"
    solo, crowd = Upstream(), Upstream()
    async with serving(tmp_path / "solo", redis_url, solo, compression_config(solo_tenant)) as served:
        alone = await served.chat(messages)
    assert alone.headers["x-gateway-action"] == "compress", alone.text
    one_build = len(solo.cheap)
    assert one_build > 1  # ~250K tokens of old turns: chunks of 48K, then a merge

    seen_inside: list[int] = []

    async def hold_first_answer() -> None:
        """The cheap model answers only once all 20 requests are inside the gateway."""
        if not seen_inside:
            await until(lambda: door.entered >= 20, 60)
            await asyncio.sleep(0.5)  # let them all reach the summary's lock
        seen_inside.append(door.entered - door.left)

    crowd.gate = hold_first_answer
    async with serving(tmp_path / "crowd", redis_url, crowd, compression_config(tenant_name)) as gateway:
        door = gateway.door
        answers = await asyncio.gather(*(gateway.chat(messages) for _ in range(20)))
        events = await gateway.events(tenant_name, 20 + one_build)
    assert [answer.status_code for answer in answers] == [200] * 20
    assert {answer.headers["x-gateway-action"] for answer in answers} == {"compress"}
    assert min(seen_inside) == 20  # every request waited inside while the summary was built
    assert len(crowd.cheap) == one_build  # one build, as for a single request
    assert len(crowd.main) == 20 and all(sent_summary(body["messages"]) for body in crowd.main)
    summaries = [event for event in events if event.action == "summary"]
    assert len(summaries) == one_build
    assert len({event.parent_id for event in summaries}) == 1  # one request paid for the build


# --- pre-compression --------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_precompression_builds_after_the_response_so_the_crossing_request_makes_no_cheap_call(
    tmp_path: Path, redis_url: str, tenant_name: str
) -> None:
    first = history(226)
    assert 200_000 <= tokens_of(first) < 250_000
    crossing = grown(first, 255_000)
    assert 250_000 <= tokens_of(crossing) < 272_000 and crossing[: len(first)] == first
    upstream = Upstream()
    released = asyncio.Event()

    async def after_release() -> None:
        await released.wait()

    upstream.gate = after_release
    config = compression_config(tenant_name, precompress_at=200_000)
    async with serving(tmp_path, redis_url, upstream, config) as served:
        early = await asyncio.wait_for(served.chat(first), 30)  # answered while the cheap model hangs
        assert early.headers["x-gateway-action"] == "forward", early.text
        assert upstream.main[-1]["messages"] == first
        await until(lambda: len(upstream.cheap) > 0, 10)  # the build started after the response
        released.set()
        await served.background_done()
        built = len(upstream.cheap)
        late = await served.chat(crossing)
        assert len(upstream.cheap) == built  # no cheap-model call on the crossing request's path
    assert late.status_code == 200, late.text
    assert late.headers["x-gateway-action"] == "compress"
    assert int(late.headers["x-gateway-forwarded-tokens"]) <= 150_000
    assert sent_summary(upstream.main[-1]["messages"])
    assert upstream.main[-1]["messages"][-1] == crossing[-1]


@pytest.mark.anyio
async def test_precompression_cost_events_point_at_the_request_that_triggered_them(
    tmp_path: Path, redis_url: str, tenant_name: str
) -> None:
    """The background build is priced, and its side events name as parent the request after which it ran
    (the request's id, as for every other side event), so a request's events add up to its net saving."""
    upstream = Upstream()
    config = compression_config(tenant_name, precompress_at=200_000)
    async with serving(tmp_path, redis_url, upstream, config) as served:
        early = await served.chat(history(226))
        await served.background_done()
        built = len(upstream.cheap)
        events = await served.events(tenant_name, 1 + built)
    assert early.headers["x-gateway-action"] == "forward", early.text
    request_id = early.headers["x-gateway-request-id"]
    assert [event.id for event in events if event.parent_id is None] == [request_id]
    summaries = [event for event in events if event.action == "summary"]
    assert built > 1 and len(summaries) == built
    assert all(event.cost_nanos > 0 for event in summaries)
    assert {event.parent_id for event in summaries} == {request_id}


# --- the cheap model misbehaves ---------------------------------------------------------------------


@pytest.mark.anyio
async def test_compression_retries_a_malformed_summary_once(
    tmp_path: Path, redis_url: str, tenant_name: str
) -> None:
    upstream = Upstream("malformed", "good")
    async with serving(tmp_path, redis_url, upstream, compression_config(tenant_name, **ONE_CALL)) as served:
        response = await served.chat(history(260))
    assert response.status_code == 200, response.text
    assert response.headers["x-gateway-action"] == "compress"
    assert len(upstream.cheap) == 2
    assert "previous answer could not be used" in upstream.cheap[1]["messages"][0]["content"]
    sent = upstream.main[0]["messages"]
    assert SUMMARY in next(str(m["content"]) for m in sent if SUMMARY_MARK in str(m["content"]))


def document_history() -> list[dict[str, Any]]:
    """A ~240K-token document pasted in an early turn, then a short chat: retrieval can cut it."""
    document = document_with_needle(2560, needle="The vault code is 7731-KILO.", at=0.4)
    return [
        {"role": "system", "content": "Answer from the documents."},
        {"role": "user", "content": document + "\n\nRead this."},
        *history(8)[1:-1],
        {"role": "user", "content": "What is the vault code?"},
    ]


@pytest.mark.parametrize(
    ("script", "on_failure", "document", "action", "warned"),
    [
        (("error",), "forward", False, "forward", "sent as it stands"),
        (("malformed", "malformed"), "forward", False, "forward", "sent as it stands"),
        (("error",), "retrieve", True, "retrieve", "retrieve next"),
        (("error",), "retrieve", False, "forward", "retrieve failed"),  # nothing to excerpt; under the cliff
    ],
)
@pytest.mark.anyio
async def test_compression_failure_follows_on_failure_with_a_warning(
    tmp_path: Path,
    redis_url: str,
    tenant_name: str,
    script: tuple[str, ...],
    on_failure: str,
    document: bool,
    action: str,
    warned: str,
) -> None:
    messages = document_history() if document else history(260)
    received = tokens_of(messages)
    assert 250_000 <= received < 272_000
    upstream = Upstream(*script, default=script[-1])
    config = compression_config(tenant_name, on_failure=on_failure, **ONE_CALL)
    async with serving(tmp_path, redis_url, upstream, config) as served:
        response = await served.chat(messages)
    assert response.status_code == 200, response.text
    assert response.headers["x-gateway-action"] == action
    warning = response.headers["x-gateway-warning"]
    assert "compress failed" in warning and warned in warning
    sent = upstream.main[0]["messages"]
    if action == "forward":  # never a silent truncation: all of it, as received
        assert sent == messages
        assert response.headers["x-gateway-forwarded-tokens"] == str(received)
    else:
        assert int(response.headers["x-gateway-forwarded-tokens"]) <= 125_000
        assert "7731-KILO" in orjson.dumps(sent).decode() and sent[-1] == messages[-1]


@pytest.mark.anyio
async def test_compression_failure_with_on_failure_reject_answers_503(
    tmp_path: Path, redis_url: str, tenant_name: str
) -> None:
    upstream = Upstream(default="error")
    config = compression_config(tenant_name, on_failure="reject", **ONE_CALL)
    async with serving(tmp_path, redis_url, upstream, config) as served:
        response = await served.chat(history(260))
    assert response.status_code == 503
    error = response.json()["error"]
    assert error["code"] == "compress_failed"
    assert "compress failed" in error["message"] and "retry later" in error["message"]
    assert "small" in error["message"]  # names the cheap model that failed
    assert len(upstream.cheap) == 3  # one call, retried by the provider's policy
    assert upstream.main == []


@pytest.mark.anyio
async def test_compression_that_cannot_reach_its_target_is_a_400_never_a_503_to_retry(
    tmp_path: Path, redis_url: str, tenant_name: str
) -> None:
    """The last user message alone is over the target: it fails the same way every time, so the answer
    is the 400 clients shorten their conversation on, not a 503 their SDKs retry."""
    paragraph = "the quick brown fox jumps over the lazy dog and keeps running far away " * 5
    pasted = "\n\n".join(f"{index}: {paragraph}" for index in range(2700))
    messages = [*history(60)[:-1], {"role": "user", "content": pasted}]
    assert 250_000 <= tokens_of(messages) < 272_000  # in the warning band: compress
    upstream = Upstream(default="good")
    config = compression_config(tenant_name, on_failure="reject", **ONE_CALL)
    async with serving(tmp_path, redis_url, upstream, config) as served:
        response = await served.chat(messages)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] == "context_length_exceeded"
    assert "over the target of 75000" in error["message"] and "the request cannot be cut" in error["message"]
    assert "retry" not in error["message"]
    assert upstream.main == []


@pytest.mark.anyio
async def test_a_compression_that_failed_leaves_no_reason_on_the_forwarded_request(
    tmp_path: Path, redis_url: str, tenant_name: str
) -> None:
    """Deferred timing plans the compression with a reason ("compressed: ..."); the cheap model fails and
    the request goes as it stands: the reason would describe what did not happen."""
    upstream = Upstream(default="error")
    config = compression_config(tenant_name, on_failure="forward", timing="deferred", **ONE_CALL)
    async with serving(tmp_path, redis_url, upstream, config) as served:
        response = await served.chat(history(260))
    assert response.status_code == 200, response.text
    assert response.headers["x-gateway-action"] == "forward"
    assert "compress failed" in response.headers["x-gateway-warning"]
    assert "x-gateway-reason" not in response.headers
    assert upstream.cheap  # the compression was tried


@pytest.mark.anyio
async def test_an_over_cliff_request_that_compressing_settled_proposes_nothing(
    tmp_path: Path, redis_url: str, tenant_name: str
) -> None:
    """Over the cliff the band's action is retrieve, after compressing when history is the bulk; compressing
    alone brought it under its target. Enforce mode did what it did: nothing is proposed."""
    upstream = Upstream(default="good")
    async with serving(tmp_path, redis_url, upstream, compression_config(tenant_name, **ONE_CALL)) as served:
        response = await served.chat(history(300))
    assert response.status_code == 200, response.text
    assert int(response.headers["x-gateway-prompt-tokens"]) > 272_000
    assert response.headers["x-gateway-action"] == "compress"
    assert "x-gateway-proposed-action" not in response.headers


# --- tool calls --------------------------------------------------------------------------------------


def budget_cutting_a_pair(messages: list[dict[str, Any]]) -> int:
    """A recent-tokens budget whose naive cut (by messages) would start at a tool message."""
    primer = tokens_of([])
    callers = [i for i, m in enumerate(messages) if m.get("tool_calls")]
    start = callers[-3] + 1  # the results of the third-last tool call
    budget = tokens_of(messages[start:]) - primer + 2
    assert messages[start]["role"] == "tool"
    assert tokens_of(messages[start - 1 :]) - primer > budget  # its call does not fit
    return budget


@pytest.mark.parametrize("by_tokens", [False, True])
@pytest.mark.anyio
async def test_compression_keeps_tool_call_pairs_whole(
    tmp_path: Path, redis_url: str, tenant_name: str, by_tokens: bool
) -> None:
    messages = tool_history(255_000)
    assert 250_000 <= tokens_of(messages) < 272_000
    assert unpaired(messages) == []
    compress: dict[str, Any] = dict(ONE_CALL)
    if by_tokens:
        compress["keep_recent_tokens"] = budget_cutting_a_pair(messages)
    upstream = Upstream()
    async with serving(tmp_path, redis_url, upstream, compression_config(tenant_name, **compress)) as served:
        response = await served.chat(messages)
    assert response.status_code == 200, response.text
    assert response.headers["x-gateway-action"] == "compress"
    sent = upstream.main[0]["messages"]
    assert sent_summary(sent) and len(sent) < len(messages)
    assert unpaired(sent) == []
    assert any(m.get("role") == "tool" for m in sent)  # recent tool results stay verbatim
    transcript = upstream.cheap[0]["messages"][1]["content"]
    assert "-> tool call call_1_0: read_file(" in transcript  # old calls are summarised, not dropped


def parallel_reads(outputs: int, tokens_each: int, *, seed: int = 31) -> list[dict[str, Any]]:
    """An agent's turn over the cliff: two short earlier turns, a task, then one assistant message calling
    ``outputs`` tools at once (Codex reads files in parallel) with the outputs the model is about to
    answer, each of about ``tokens_each`` tokens."""
    prose = ProseGenerator(seed)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "List the services."},
        {"role": "assistant", "content": "api, worker and scheduler."},
        {"role": "user", "content": "Read every module of the worker and say what breaks the build."},
    ]
    ids = [f"call_{n}" for n in range(outputs)]
    calls = [
        {"id": i, "type": "function", "function": {"name": "read_file", "arguments": f'{{"n": {n}}}'}}
        for n, i in enumerate(ids)
    ]
    messages.append({"role": "assistant", "content": None, "tool_calls": calls})
    for i in ids:
        text = ""
        while tokens_of([{"role": "tool", "content": text}]) < tokens_each:
            text += " ".join(prose.sentence() for _ in range(40)) + " "
        messages.append({"role": "tool", "tool_call_id": i, "content": text.strip()})
    return messages


@pytest.mark.parametrize(
    ("outputs", "tokens_each", "action", "under_cliff"),
    [
        (40, 7_600, "forward", False),  # no output is a document to excerpt: nothing can cut it
        (14, 22_000, "retrieve", True),  # outputs as large as Codex's: retrieval cuts them
    ],
)
@pytest.mark.anyio
async def test_a_tool_loop_over_the_cliff_with_many_outputs_in_its_turn_is_answered(
    tmp_path: Path,
    redis_url: str,
    tenant_name: str,
    outputs: int,
    tokens_each: int,
    action: str,
    under_cliff: bool,
) -> None:
    """The outputs the model is about to answer are never summarised or excerpted by compression; the
    turn is never lost: cut by retrieval where it can be, else sent as it stands within the window,
    with a warning, billed above the cliff, and never larger than received."""
    messages = parallel_reads(outputs, tokens_each)
    received = tokens_of(messages)
    assert 272_000 < received < 1_050_000
    upstream = Upstream()
    async with serving(tmp_path, redis_url, upstream, compression_config(tenant_name, **ONE_CALL)) as served:
        response = await served.chat(messages)
    assert response.status_code == 200, response.text
    assert response.headers["x-gateway-action"] == action
    forwarded = int(response.headers["x-gateway-forwarded-tokens"])
    assert forwarded <= received
    [sent] = [body["messages"] for body in upstream.main]
    assert unpaired(sent) == []
    assert sent[:5] == messages[:5]
    if under_cliff:
        assert forwarded <= 125_000
    else:
        assert (sent, forwarded) == (messages, received)
        warning = response.headers["x-gateway-warning"]
        assert (
            "above its price cliff of 272000 tokens (on_exhausted: forward, nothing left to cut)" in warning
        )
    assert not any("left out by the gateway" in str(m.get("content")) for m in sent)


# --- the cost side -----------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_compression_cheap_calls_are_side_events_of_the_request(
    tmp_path: Path, redis_url: str, tenant_name: str
) -> None:
    upstream = Upstream()
    async with serving(tmp_path, redis_url, upstream, compression_config(tenant_name)) as served:
        response = await served.chat(history(260))
        calls = len(upstream.cheap)
        events = await served.events(tenant_name, 1 + calls)
    assert response.headers["x-gateway-action"] == "compress", response.text
    request_id = response.headers["x-gateway-request-id"]
    main = [event for event in events if event.id == request_id]
    assert len(main) == 1 and main[0].action == "compress" and main[0].parent_id is None
    side = sorted((event for event in events if event.parent_id == request_id), key=lambda e: e.id)
    assert calls > 1 and len(side) == calls == len(events) - 1
    assert {event.id for event in side} == {f"{request_id}:summary:{n}" for n in range(1, calls + 1)}
    for event in side:
        assert (event.action, event.model, event.status) == ("summary", "small", 200)
        assert (event.input_tokens, event.output_tokens) == (40_000, 600)
        assert event.cost_nanos == 40_000 * 750 + 600 * 4_500  # $0.75 and $4.50 per million
        assert event.counterfactual_nanos == 0


# --- settings the compressors cannot run with ------------------------------------------------------


@pytest.mark.anyio
async def test_compression_settings_the_summariser_refuses_follow_on_failure(
    tmp_path: Path, redis_url: str, tenant_name: str
) -> None:
    """A cheap model whose window cannot hold two summaries per call: compress fails, on_failure runs."""
    messages = history(260)
    upstream = Upstream()
    config = compression_config(tenant_name, on_failure="forward")
    config["models"]["small"]["context_window"] = 12_000
    async with serving(tmp_path, redis_url, upstream, config) as served:
        response = await served.chat(messages)
    assert response.status_code == 200, response.text
    assert response.headers["x-gateway-action"] == "forward"
    warning = response.headers["x-gateway-warning"]
    assert "compress failed" in warning and "fewer than two summaries" in warning, warning
    assert upstream.cheap == []
    assert upstream.main[0]["messages"] == messages


@pytest.mark.parametrize(
    ("section", "field", "fragment"),
    [
        ({"compress": {"chunk_tokens": 6_000}}, "compress.chunk_tokens", "below 8000"),
        (
            {"retrieve": {"document_min_tokens": 600}},
            "retrieve.document_min_tokens",
            "below chunk_tokens_max",
        ),
    ],
)
def test_check_config_refuses_sizes_the_compressors_cannot_run_with_saying_where(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], section: dict[str, Any], field: str, fragment: str
) -> None:
    config = make_config()
    config["policies"] = {"default": {"name": "default", **section}}
    path = write_config(tmp_path / "gateway.yaml", config)
    key = field.rsplit(".", 1)[1]
    line = next(n for n, text in enumerate(path.read_text().splitlines(), 1) if f"{key}:" in text)
    assert main(["check-config", str(path)]) == 1
    out = capsys.readouterr().out
    assert f"{path}:{line}: policies.default.{field}: " in out and fragment in out, out


@pytest.mark.anyio
async def test_retrieval_settings_the_retriever_refuses_fail_the_transform(
    redis_client: aioredis.Redis, tenant_name: str
) -> None:
    """Settings that slipped past the config's checks end in TransformFailed (on_failure), not a 500."""
    runtime = build_runtime(GatewayConfig.model_validate(make_config()), counter=shared_counter())
    facts = Facts(tenant=tenant_name, model="gpt-5.4", prompt_tokens=300_000)
    decision = runtime.engine.decide(facts)
    broken = replace(decision, retrieve=replace(decision.retrieve, document_min_tokens=600))
    transforms = direct_transforms(runtime, redis_client, {})
    with pytest.raises(TransformFailed, match="document_min_tokens >= chunk_max"):
        await transforms.run(Action.RETRIEVE, document_history(), broken, facts)


def direct_transforms(
    runtime: Runtime, redis: aioredis.Redis, retrievers: dict[Any, Any]
) -> CompressorTransforms:
    """The transforms as the pipeline makes them, for calls without the app (no upstream is reached)."""
    return CompressorTransforms(
        runtime=runtime,
        pool=UpstreamPool(lambda provider: httpx.AsyncClient()),
        redis=redis,
        record=RequestRecord(request_id="r", endpoint="chat"),
        retrievers=retrievers,
    )


@pytest.mark.anyio
async def test_one_retriever_per_tenant_serves_models_with_different_budgets(
    redis_client: aioredis.Redis, tenant_name: str
) -> None:
    runtime = build_runtime(GatewayConfig.model_validate(make_config()), counter=shared_counter())
    retrievers: dict[Any, Any] = {}
    transforms = direct_transforms(runtime, redis_client, retrievers)
    messages = document_history()
    budgets = []
    for model in ("gpt-5.4", "gpt-5.2"):
        facts = Facts(tenant=tenant_name, model=model, prompt_tokens=tokens_of(messages))
        decision = runtime.engine.decide(facts)
        budgets.append(decision.retrieve.budget_tokens)
        cut = await transforms.run(Action.RETRIEVE, messages, decision, facts)
        forwarded = tokens_of(cut)
        assert forwarded <= decision.retrieve.budget_tokens and budgets[-1] - forwarded < 10_000, model
        assert "7731-KILO" in orjson.dumps(cut).decode()
    assert budgets[0] != budgets[1]
    assert len(retrievers) == 1
