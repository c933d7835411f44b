"""A stored response the client got a 200 for stays fetchable and chainable by its owner: what Redis cannot
take before the answer goes is kept on disk and in the process, and written once Redis is back."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
import redis.asyncio as aioredis

from gateway.fronts.responses.memory import Remembered, ResponseMemory, response_key
from gateway.redis.server import EmbeddedRedis
from tests.ports import free_port

VALUE = Remembered(provider="openai", model="gpt-5.4", input_tokens=1_200, output_tokens=80)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[EmbeddedRedis]:
    """A Redis of the test's own, on a fixed port, that the test stops and starts again."""
    started = EmbeddedRedis(tmp_path / "redis", port=free_port(), persist=False)
    started.start()
    try:
        yield started
    finally:
        started.stop()


def client_of(server: EmbeddedRedis) -> aioredis.Redis:
    return aioredis.Redis.from_url(server.url, socket_connect_timeout=0.2, socket_timeout=0.5, retry=None)


async def until_written(memory: ResponseMemory) -> None:
    with anyio.fail_after(15):
        while len(memory.unwritten):
            await anyio.sleep(0.05)


@pytest.mark.anyio
async def test_a_response_remembered_while_redis_is_down_is_recalled_and_written_when_it_is_back(
    server: EmbeddedRedis, tmp_path: Path, tenant_name: str
) -> None:
    client = client_of(server)
    memory = ResponseMemory(client, spool_dir=tmp_path / "spool-responses")
    memory.start()
    try:
        server.stop()
        assert await memory.remember(tenant_name, "resp_down_1", VALUE)
        held_here = await memory.recall(tenant_name, "resp_down_1")
        on_disk = list((tmp_path / "spool-responses").glob("*.jsonl"))
        server.start()
        await until_written(memory)
        elsewhere = await ResponseMemory(client).recall(tenant_name, "resp_down_1")  # another process
        ttl = await client.ttl(response_key(tenant_name, "resp_down_1"))
    finally:
        await memory.aclose()
        await client.aclose()
    assert held_here == VALUE
    assert len(on_disk) == 1
    assert elsewhere == VALUE
    assert 29 * 24 * 3600 < ttl <= 30 * 24 * 3600
    assert (memory.unwritten.spooled, memory.unwritten.written) == (1, 1)


@pytest.mark.anyio
async def test_responses_left_on_disk_by_a_stopped_process_are_written_by_the_next_one(
    server: EmbeddedRedis, tmp_path: Path, tenant_name: str
) -> None:
    spool = tmp_path / "spool-responses"
    client = client_of(server)
    try:
        server.stop()
        first = ResponseMemory(client, spool_dir=spool)
        first.start()
        for number in range(3):
            assert await first.remember(tenant_name, f"resp_left_{number}", VALUE)
        await first.aclose()  # Redis still down: the values stay on disk
        server.start()
        second = ResponseMemory(client, spool_dir=spool)
        second.start()
        await until_written(second)
        await second.aclose()
        recalled = [await ResponseMemory(client).recall(tenant_name, f"resp_left_{n}") for n in range(3)]
    finally:
        await client.aclose()
    assert recalled == [VALUE, VALUE, VALUE]
    assert list(spool.glob("*.jsonl")) == []


@pytest.mark.anyio
async def test_a_response_is_in_redis_before_remember_returns_when_redis_answers(
    redis_client: aioredis.Redis, tmp_path: Path, tenant_name: str
) -> None:
    memory = ResponseMemory(redis_client, spool_dir=tmp_path / "spool-responses")
    assert await memory.remember(tenant_name, "resp_up_1", VALUE)
    raw = await redis_client.get(response_key(tenant_name, "resp_up_1"))
    await memory.aclose()
    assert raw is not None
    assert (memory.unwritten.spooled, len(memory.unwritten)) == (0, 0)
    assert list((tmp_path / "spool-responses").glob("*.jsonl")) == []


@pytest.mark.anyio
async def test_an_other_tenant_never_recalls_a_response_held_aside(
    server: EmbeddedRedis, tenant_name: str
) -> None:
    client = client_of(server)
    memory = ResponseMemory(client)
    try:
        server.stop()
        assert await memory.remember(tenant_name, "resp_mine", VALUE)
        theirs = await memory.recall(f"{tenant_name}-other", "resp_mine")
        mine = await memory.recall(tenant_name, "resp_mine")
    finally:
        await memory.aclose()
        await client.aclose()
    assert (theirs, mine) == (None, VALUE)


@pytest.mark.anyio
async def test_a_response_redis_is_too_busy_to_take_in_time_is_held_then_written(
    server: EmbeddedRedis, tmp_path: Path, tenant_name: str
) -> None:
    """A Redis that takes no write for longer than an answer waits (``CLIENT PAUSE WRITE``, as a machine
    too busy to serve it would): the value is held, the answer goes, and the write lands once it can."""
    client = client_of(server)
    admin = client_of(server)
    memory = ResponseMemory(client, spool_dir=tmp_path / "spool-responses")
    memory.start()
    try:
        await admin.execute_command("CLIENT", "PAUSE", 3_000, "WRITE")
        remembered = await memory.remember(tenant_name, "resp_busy_1", VALUE)
        held = len(memory.unwritten)
        await until_written(memory)
        elsewhere = await ResponseMemory(client).recall(tenant_name, "resp_busy_1")
    finally:
        await memory.aclose()
        await admin.aclose()
        await client.aclose()
    assert remembered and held == 1
    assert elsewhere == VALUE
