"""Background responses (``background: true``): billed once, as the request that created them, when the
gateway sees them end (a poll, a streamed retrieve, a cancel, a delete, or its own look); and
``GET /v1/responses/{id}?stream=true`` relayed as it arrives."""

from __future__ import annotations

import functools
import re
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import orjson
import pytest
import redis
import redis.asyncio as aioredis
import respx
from starlette.testclient import TestClient

from gateway.base.record import RequestRecord
from gateway.base.types import Tenant
from gateway.fronts.responses.memory import (
    PENDING_KEY,
    Pending,
    Remembered,
    ResponseMemory,
    remembering,
    response_key,
)
from tests.factories import ADMIN_KEY, TENANT_KEY, UPSTREAM, gateway_client, make_config
from tests.mock.responses import response_events, responses_answer, sse

BY_ID = re.compile(r"/v1/responses/(?P<rid>resp_[^/]+)(?P<action>/cancel)?$")
USAGE = {
    "input_tokens": 1_234,
    "input_tokens_details": {"cached_tokens": 200},
    "output_tokens": 567,
    "output_tokens_details": {"reasoning_tokens": 100},
    "total_tokens": 1_801,
}


class BackgroundUpstream:
    """Runs background responses: created ``queued`` without usage, ``in_progress`` for ``polls``
    retrievals, then ``completed`` with ``USAGE``. ``gate``, when set, holds a streamed retrieval
    after its first event until the test has read that event."""

    def __init__(self, *, polls: int = 1) -> None:
        self.polls = polls
        self.final: dict[str, dict[str, Any]] = {}
        self.left: dict[str, int] = {}
        self.retrievals: list[httpx.Request] = []
        self.gate: threading.Event | None = None
        self.gate_opened_by_client = False
        self.cut_creation_stream = False

    def create(self, request: httpx.Request) -> httpx.Response:
        body = orjson.loads(request.content)
        answer = responses_answer(body, number=len(self.final) + 1)
        if not body.get("background"):
            return httpx.Response(200, json=answer)
        final = {**answer, "background": True, "usage": USAGE}
        self.final[answer["id"]] = final
        self.left[answer["id"]] = self.polls
        queued = {**final, "status": "queued", "output": [], "usage": None}
        if not body.get("stream"):
            return httpx.Response(200, json=queued)
        events = list(response_events(final))
        if self.cut_creation_stream:
            events = events[:3]  # created, in_progress, the first item: the connection drops there
        return httpx.Response(
            200, content=self.gated(sse(iter(events))), headers={"content-type": "text/event-stream"}
        )

    def by_id(self, request: httpx.Request, rid: str, action: str | None) -> httpx.Response:
        final = self.final.get(rid)
        if final is None:
            return httpx.Response(404, json={"error": {"message": f"No response found with id '{rid}'."}})
        if request.method == "DELETE":
            del self.final[rid]
            return httpx.Response(200, json={"id": rid, "object": "response.deleted", "deleted": True})
        if action:
            return httpx.Response(200, json={**final, "status": "cancelled"})
        self.retrievals.append(request)
        if request.url.params.get("stream") == "true":
            return httpx.Response(
                200,
                content=self.gated(sse(response_events(final))),
                headers={"content-type": "text/event-stream"},
            )
        if self.left[rid] > 0:
            self.left[rid] -= 1
            return httpx.Response(200, json={**final, "status": "in_progress", "output": [], "usage": None})
        return httpx.Response(200, json=final)

    async def gated(self, payload: bytes) -> AsyncIterator[bytes]:
        first, rest = payload.split(b"\n\n", 1)
        yield first + b"\n\n"
        if self.gate is not None:
            self.gate_opened_by_client = await anyio.to_thread.run_sync(self.gate.wait, 10.0)
        yield rest


@pytest.fixture
def background() -> Iterator[tuple[respx.Router, BackgroundUpstream]]:
    router = respx.Router(assert_all_called=False)
    upstream = BackgroundUpstream()
    router.post(f"{UPSTREAM}/responses").mock(side_effect=upstream.create)
    router.route(path__regex=BY_ID).mock(side_effect=upstream.by_id)
    yield router, upstream


def config(tenant: str) -> dict[str, Any]:
    return make_config(tenants={tenant: {"keys": [TENANT_KEY]}})


CREATE = {"model": "gpt-5.4", "input": "Write the migration plan.", "background": True}


def events(client: TestClient, tenant: str, *, until: str, timeout: float = 10.0) -> list[dict[str, Any]]:
    """The tenant's cost events, once the one with id ``until`` is stored."""
    deadline = time.monotonic() + timeout
    while True:
        answer = client.get(
            f"/admin/costs?tenant={tenant}&format=ndjson", headers={"authorization": f"Bearer {ADMIN_KEY}"}
        )
        found = [orjson.loads(line) for line in answer.text.splitlines() if line]
        if any(event["id"] == until for event in found) or time.monotonic() > deadline:
            return found
        time.sleep(0.02)


def marker(client: TestClient) -> str:
    """A plain request whose event, once stored, shows that every earlier one would be too."""
    return client.post("/v1/responses", json={"model": "gpt-5.4", "input": "ping"}).headers["x-request-id"]


def pending_of(redis_url: str, tenant: str, response_id: str) -> tuple[dict[str, Any] | None, float | None]:
    """The remembered value of a response and its score in the pending set."""
    with redis.Redis.from_url(redis_url) as client:
        raw = client.get(response_key(tenant, response_id))
        score = client.zscore(PENDING_KEY, orjson.dumps([tenant, response_id]))
    return (orjson.loads(raw) if raw else None), score


def test_a_background_response_is_billed_once_when_a_poll_sees_it_end(
    tmp_path: Path, redis_url: str, tenant_name: str, background: Any
) -> None:
    router, _ = background
    with gateway_client(tmp_path, redis_url, router, config=config(tenant_name)) as client:
        created = client.post("/v1/responses", json=CREATE)
        request_id, response_id = created.headers["x-request-id"], created.json()["id"]
        running = client.get(f"/v1/responses/{response_id}")
        before = events(client, tenant_name, until=marker(client))
        remembered, score = pending_of(redis_url, tenant_name, response_id)
        ended = client.get(f"/v1/responses/{response_id}")
        after = events(client, tenant_name, until=request_id)
        client.get(f"/v1/responses/{response_id}")  # seen ended once more: nothing more to bill
        again = events(client, tenant_name, until=marker(client))
        settled, settled_score = pending_of(redis_url, tenant_name, response_id)
    assert created.json()["status"] == "queued" and running.json()["status"] == "in_progress"
    assert request_id not in [event["id"] for event in before]
    assert remembered is not None and remembered["q"]["request_id"] == request_id and score is not None
    assert ended.json()["status"] == "completed"
    (billed,) = [event for event in after if event["id"] == request_id]
    assert (billed["input_tokens"], billed["cached_tokens"], billed["output_tokens"]) == (1_234, 200, 567)
    assert billed["reasoning_tokens"] == 100 and billed["estimated"] is False
    assert float(billed["cost_usd"]) > 0 and billed["model"] == "gpt-5.4" and billed["action"] == "forward"
    assert [event["id"] for event in again].count(request_id) == 1
    assert settled is not None and "q" not in settled and settled["i"] == 1_234 and settled_score is None


def test_a_streamed_retrieve_is_relayed_as_it_arrives_and_bills_the_response(
    tmp_path: Path, redis_url: str, tenant_name: str, background: Any
) -> None:
    router, upstream = background
    upstream.gate = threading.Event()
    with gateway_client(tmp_path, redis_url, router, config=config(tenant_name)) as client:
        created = client.post("/v1/responses", json=CREATE)
        request_id, response_id = created.headers["x-request-id"], created.json()["id"]
        with client.stream("GET", f"/v1/responses/{response_id}?stream=true&starting_after=0") as streamed:
            chunks = streamed.iter_raw()
            first = next(chunks)
            upstream.gate.set()  # the upstream holds the rest until the client has the first event
            received = first + b"".join(chunks)
        found = events(client, tenant_name, until=request_id)
    assert upstream.gate_opened_by_client
    assert first.startswith(b"event: response.created")
    assert received == sse(response_events(upstream.final[response_id]))
    assert upstream.retrievals[-1].url.query == b"stream=true&starting_after=0"
    assert streamed.headers["content-type"].startswith("text/event-stream")
    (billed,) = [event for event in found if event["id"] == request_id]
    assert billed["output_tokens"] == 567 and billed["estimated"] is False


def test_a_streamed_background_creation_cut_short_is_billed_when_it_ends(
    tmp_path: Path, redis_url: str, tenant_name: str, background: Any
) -> None:
    router, upstream = background
    upstream.cut_creation_stream = True
    with gateway_client(tmp_path, redis_url, router, config=config(tenant_name)) as client:
        created = client.post("/v1/responses", json={**CREATE, "stream": True})
        request_id = created.headers["x-request-id"]
        (response_id,) = upstream.final
        before = events(client, tenant_name, until=marker(client))
        client.get(f"/v1/responses/{response_id}")
        client.get(f"/v1/responses/{response_id}")
        after = events(client, tenant_name, until=request_id)
    assert request_id not in [event["id"] for event in before]
    (billed,) = [event for event in after if event["id"] == request_id]
    assert billed["input_tokens"] == 1_234 and billed["stream"] is True and billed["estimated"] is False


def test_cancel_and_delete_bill_a_running_background_response(
    tmp_path: Path, redis_url: str, tenant_name: str, background: Any
) -> None:
    router, upstream = background
    upstream.polls = 5
    with gateway_client(tmp_path, redis_url, router, config=config(tenant_name)) as client:
        cancelled = client.post("/v1/responses", json=CREATE)
        client.post(f"/v1/responses/{cancelled.json()['id']}/cancel")
        deleted = client.post("/v1/responses", json=CREATE)
        upstream.left[deleted.json()["id"]] = 0  # done by the time the client deletes it
        gone = client.delete(f"/v1/responses/{deleted.json()['id']}")
        found = events(client, tenant_name, until=marker(client))
    ids = [event["id"] for event in found]
    assert cancelled.headers["x-request-id"] in ids
    assert gone.json()["deleted"] is True and deleted.headers["x-request-id"] in ids


def test_the_gateway_looks_at_background_responses_nobody_polls(
    tmp_path: Path, redis_url: str, tenant_name: str, background: Any
) -> None:
    router, upstream = background
    with gateway_client(tmp_path, redis_url, router, config=config(tenant_name)) as client:
        settler = client.app.state.gateway.responses.settler  # type: ignore[attr-defined]
        portal = client.portal
        assert portal is not None

        def sweep(now_ms: int) -> None:
            portal.call(functools.partial(settler.sweep, now_ms=now_ms))

        kept = client.post("/v1/responses", json=CREATE)
        lost = client.post("/v1/responses", json=CREATE)
        kept_id, lost_id = kept.json()["id"], lost.json()["id"]
        del upstream.final[lost_id]  # deleted upstream, or expired, before anyone asked
        now = int(time.time() * 1000)
        sweep(now_ms=now + 1_000)  # not due yet: a first look 15 s after creation
        assert upstream.retrievals == []
        sweep(now_ms=now + 20_000)  # still running: looked at again later
        _, score = pending_of(redis_url, tenant_name, kept_id)
        sweep(now_ms=now + 60_000)
        found = events(client, tenant_name, until=kept.headers["x-request-id"])
    assert score is not None and score >= now + 20_000 + 15_000
    assert len(upstream.retrievals) == 2
    billed = {event["id"]: event for event in found}
    exact, estimated = billed[kept.headers["x-request-id"]], billed[lost.headers["x-request-id"]]
    assert exact["output_tokens"] == 567 and exact["estimated"] is False
    assert estimated["estimated"] is True and estimated["input_tokens"] == int(
        lost.headers["x-gateway-prompt-tokens"]
    )
    assert pending_of(redis_url, tenant_name, kept_id)[1] is None
    assert pending_of(redis_url, tenant_name, lost_id)[1] is None


@pytest.mark.anyio
async def test_pending_responses_are_claimed_by_one_looker_at_a_time(
    redis_client: Any, tenant_name: str
) -> None:
    memory = ResponseMemory(redis_client)
    member = orjson.dumps([tenant_name, "resp_claim_1"])
    await redis_client.zadd(PENDING_KEY, {member: 1_000})
    first = await memory.claim_pending(2_000, lease_ms=60_000, limit=1_000)
    second = await memory.claim_pending(2_000, lease_ms=60_000, limit=1_000)
    later = await memory.claim_pending(62_001, lease_ms=60_000, limit=1_000)
    await memory.settled(tenant_name, "resp_claim_1")
    assert (tenant_name, "resp_claim_1") in first
    assert (tenant_name, "resp_claim_1") not in second
    assert (tenant_name, "resp_claim_1") in later


@pytest.mark.anyio
async def test_gateways_with_other_key_prefixes_keep_their_pending_responses_apart(
    redis_client: Any, tenant_name: str
) -> None:
    ours, theirs = ResponseMemory(redis_client), ResponseMemory(redis_client, prefix=f"{tenant_name}-other")
    pending = Pending(
        request_id="req_1", key_id="k", requested_model="gpt-5.4", action="forward", started_at=0.0
    )
    value = Remembered(provider="mock", model="gpt-5.4", input_tokens=1, output_tokens=0, pending=pending)
    assert await theirs.remember(tenant_name, "resp_theirs", value, look_at_ms=1)
    claimed_by_us = await ours.claim_pending(10, lease_ms=1, limit=1_000)
    claimed_by_them = await theirs.claim_pending(10, lease_ms=1, limit=1_000)
    recalled = await ours.recall(tenant_name, "resp_theirs"), await theirs.recall(tenant_name, "resp_theirs")
    await theirs.settled(tenant_name, "resp_theirs")
    assert (tenant_name, "resp_theirs") not in claimed_by_us
    assert claimed_by_them == [(tenant_name, "resp_theirs")]
    assert recalled[0] is None and recalled[1] == value


@pytest.mark.anyio
async def test_a_pending_record_redis_cannot_keep_leaves_the_request_billed_at_once(
    redis_client: Any, tenant_name: str
) -> None:
    """Nothing goes unbilled: without a pending record, the request's own (estimated) event is written."""

    def created() -> RequestRecord:
        record = RequestRecord(
            request_id="req_pending_1", endpoint="responses", tenant=Tenant(tenant_name, "k1")
        )
        record.called_model = record.requested_model = "gpt-5.4"
        record.forwarded_tokens = 120
        return record

    down = aioredis.Redis.from_url("redis://127.0.0.1:1", socket_connect_timeout=0.2)
    unkept, kept = created(), created()
    try:
        await remembering(ResponseMemory(down), unkept, keep=True, background=True)(
            "resp_p1", {"status": "queued"}
        )
    finally:
        await down.aclose()
    memory = ResponseMemory(redis_client)
    await remembering(memory, kept, keep=True, background=True)("resp_p1", {"status": "queued"})
    remembered = await memory.recall(tenant_name, "resp_p1")
    await memory.settled(tenant_name, "resp_p1")
    assert unkept.pending_response is None
    assert kept.pending_response == "resp_p1"
    assert remembered is not None and remembered.pending is not None
    assert remembered.pending.request_id == "req_pending_1" and remembered.pending.forwarded_tokens == 120
