"""Graceful shutdown of `gateway serve`: a stream in flight finishes (or is cut at the deadline and still
metered), the ledger is flushed into Redis, the embedded Redis stops last, and the process exits 0."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import orjson
import pytest
import redis.asyncio as aioredis

from gateway.ledger import CostEvent, Ledger, LedgerReader, Period
from gateway.redis.server import EmbeddedRedis
from tests.e2e.processes import ROOT, wait_until_up
from tests.factories import TENANT_KEY, make_config, write_config
from tests.ports import free_port

CHUNKS = 20
PROMPT = "x" * 34  # the mock answers "echo: " + the prompt: 40 characters, 20 pieces of 2


@contextmanager
def serving(
    directory: Path, config: dict[str, Any], *, wait_for: str = "/readyz", **env: str
) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """`gateway serve` in a process group of its own (so a test can Ctrl-C it as a terminal would),
    waited for until ``wait_for`` answers (by default until it is ready), with its own data directory and
    log in ``directory``; no GATEWAY_* variable of the test's own environment reaches it."""
    directory.mkdir(parents=True, exist_ok=True)
    port = free_port()
    full_env = {
        **{name: value for name, value in os.environ.items() if not name.startswith("GATEWAY_")},
        "GATEWAY_CONFIG": str(write_config(directory / "gateway.yaml", config)),
        "GATEWAY_PORT": str(port),
        "GATEWAY_DATA_DIR": str(directory / "data"),
        **env,
    }
    gateway = Path(sys.executable).parent / "gateway"
    with (directory / "gateway.log").open("wb") as log:
        process = subprocess.Popen(
            [str(gateway), "serve"], cwd=ROOT, env=full_env, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
        try:
            wait_until_up(f"http://127.0.0.1:{port}{wait_for}", process)
            yield process, f"http://127.0.0.1:{port}"
        finally:
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(30)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait()


def mock_config(mock_url: str, tenants: dict[str, Any]) -> dict[str, Any]:
    config = make_config(tenants=tenants)
    config["providers"]["mock"]["base_url"] = f"{mock_url}/v1"
    return config


@pytest.fixture
def slow_stream(mock: httpx.Client) -> None:
    mock.post("/_control", json={"chunk_delay": 0.2, "chunks": CHUNKS})


def stream_and_stop(url: str, request_id: str, stop: object) -> list[bytes]:
    """Open a stream, call ``stop()`` once its first content chunk has arrived, read it to its end."""
    body = {"model": "gpt-5.4", "stream": True, "messages": [{"role": "user", "content": PROMPT}]}
    events: list[bytes] = []
    headers = {"authorization": f"Bearer {TENANT_KEY}", "x-request-id": request_id}
    with (
        httpx.Client(timeout=60) as client,
        client.stream("POST", f"{url}/v1/chat/completions", json=body, headers=headers) as response,
    ):
        assert response.status_code == 200
        try:
            for line in response.iter_lines():
                if line.startswith("data: "):
                    events.append(line.removeprefix("data: ").encode())
                    if len(events) == 2:
                        stop()  # type: ignore[operator]
        except httpx.HTTPError:
            pass  # cut at the deadline: what arrived is returned
    return events


def content_of(events: list[bytes]) -> str:
    text = ""
    for event in events:
        if event != b"[DONE]":
            for choice in orjson.loads(event)["choices"]:
                text += choice["delta"].get("content") or ""
    return text


async def cost_event(redis_url: str, tenant: str, request_id: str) -> CostEvent | None:
    """The event of the request the client sent with ``x-request-id: <request_id>``."""
    client = aioredis.Redis.from_url(redis_url)
    try:
        now = int(time.time() * 1000)
        period = Period(now - 3_600_000, now + 3_600_000)
        found = [event async for event in LedgerReader(client).events(tenant, period)]
    finally:
        await client.aclose()
    return next((event for event in found if event.client_request_id == request_id), None)


@pytest.fixture
def config(mock_url: str, tenant_name: str) -> dict[str, Any]:
    return mock_config(mock_url, {tenant_name: {"keys": [TENANT_KEY]}})


@pytest.mark.anyio
async def test_serve_sigterm_lets_a_stream_in_flight_finish(
    tmp_path: Path, config: dict[str, Any], slow_stream: None, redis_url: str, tenant_name: str
) -> None:
    request_id = f"req-{uuid.uuid4().hex}"
    with serving(tmp_path, config, GATEWAY_REDIS_URL=redis_url) as (process, url):
        events = stream_and_stop(url, request_id, lambda: process.send_signal(signal.SIGTERM))
        code = process.wait(60)
    assert events[-1] == b"[DONE]"
    assert content_of(events) == f"echo: {PROMPT}"
    assert sum(1 for event in events if b'"content":"xx"' in event) == CHUNKS - 3  # "echo: x" spans 3
    assert code == 0
    event = await cost_event(redis_url, tenant_name, request_id)
    assert event is not None, "the stream's cost event must be in Redis once the gateway has exited"
    assert event.output_tokens > 0 and not event.estimated


@pytest.mark.anyio
async def test_serve_ctrl_c_with_workers_drains_the_ledger_into_the_embedded_redis(
    tmp_path: Path, config: dict[str, Any], slow_stream: None, tenant_name: str
) -> None:
    """SIGINT to the whole process group, as a terminal sends it: the embedded Redis must not stop
    before the workers have written the stream's cost event into it."""
    request_id = f"req-{uuid.uuid4().hex}"
    with serving(tmp_path, config, GATEWAY_WORKERS="2") as (process, url):
        events = stream_and_stop(url, request_id, lambda: os.killpg(process.pid, signal.SIGINT))
        code = process.wait(60)
    assert events[-1] == b"[DONE]"
    assert code == 0
    spool = tmp_path / "data" / "spool"
    assert sum(path.stat().st_size for path in spool.glob("*.jsonl")) == 0, "nothing may wait in the spool"
    with EmbeddedRedis(tmp_path / "data" / "redis") as server:  # the same data: AOF and snapshot
        event = await cost_event(server.url, tenant_name, request_id)
    assert event is not None and not event.estimated


@pytest.mark.anyio
async def test_serve_graceful_timeout_cuts_a_long_stream_and_still_meters_it(
    tmp_path: Path, config: dict[str, Any], slow_stream: None, redis_url: str, tenant_name: str
) -> None:
    """Past the deadline the stream is cut; its cost (estimated from what was relayed) is recorded once:
    in Redis, or, when it arrived after the ledger closed, in the spool that the next start replays."""
    request_id = f"req-{uuid.uuid4().hex}"
    env = {"GATEWAY_REDIS_URL": redis_url, "GATEWAY_GRACEFUL_TIMEOUT": "1"}
    with serving(tmp_path, config, **env) as (process, url):
        events = stream_and_stop(url, request_id, lambda: process.send_signal(signal.SIGTERM))
        code = process.wait(60)
    assert b"[DONE]" not in events, "the stream outlived the deadline: it is cut"
    assert len(content_of(events)) < len(f"echo: {PROMPT}")
    assert code == 0
    client = aioredis.Redis.from_url(redis_url)
    try:
        async with Ledger(client, spool_dir=tmp_path / "data" / "spool") as ledger:  # the next start
            for _ in range(200):
                if not ledger.stats().spool_pending:
                    break
                await anyio.sleep(0.05)
            assert not ledger.stats().spool_pending
    finally:
        await client.aclose()
    event = await cost_event(redis_url, tenant_name, request_id)
    assert event is not None, "a stream cut at the deadline is still metered"
    assert event.input_tokens > 0
