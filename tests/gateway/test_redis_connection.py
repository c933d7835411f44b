"""The gateway's Redis connection writes within ``socket_timeout`` without a task per write, and fails as
redis-py's does when a write cannot finish."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis
from redis.exceptions import TimeoutError as RedisTimeoutError

from gateway.redis.connect import redis_pool
from gateway.redis.connection import Connection
from gateway.redis.server import EmbeddedRedis
from tests.ports import free_port

pytestmark = pytest.mark.anyio


@pytest.fixture
async def client(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    client = aioredis.Redis(connection_pool=redis_pool(redis_url))
    try:
        yield client
    finally:
        await client.aclose()


@pytest.fixture
def stoppable(tmp_path: Path) -> Iterator[EmbeddedRedis]:
    """A Redis of the test's own, on TCP, that the test stops reading (SIGSTOP) and lets go on."""
    with EmbeddedRedis(tmp_path / "redis", port=free_port(), persist=False) as server:
        yield server


def tasks_made(loop: asyncio.AbstractEventLoop) -> list[str]:
    """Count the tasks the loop makes from now on (their coroutines' names)."""
    made: list[str] = []
    default = loop.get_task_factory()

    def factory(loop: asyncio.AbstractEventLoop, coro: Any, **kwargs: Any) -> asyncio.Task[Any]:
        made.append(getattr(coro, "__qualname__", repr(coro)))
        if default is not None:
            return default(loop, coro, **kwargs)  # type: ignore[arg-type]
        return asyncio.Task(coro, loop=loop, **kwargs)

    loop.set_task_factory(factory)
    return made


async def test_the_pool_of_a_tcp_url_uses_it_and_writes_make_no_task(
    client: aioredis.Redis, redis_url: str
) -> None:
    if not redis_url.startswith("redis://"):
        pytest.skip("the run's Redis is not on TCP (another scheme keeps redis-py's own connection)")
    assert client.connection_pool.connection_class is Connection
    await client.ping()  # connected: what follows only writes and reads
    loop = asyncio.get_running_loop()
    made = tasks_made(loop)
    try:
        await client.set("gw-test:connection", "1")
        one_command = list(made)
        pipe = client.pipeline(transaction=False)
        pipe.incr("gw-test:connection")
        pipe.get("gw-test:connection")
        replies = await pipe.execute()
    finally:
        loop.set_task_factory(None)
    assert replies == [2, b"2"]
    assert one_command == []
    # a pipeline's only task is redis-py's shielded return of the connection to the pool
    assert made == ["BlockingConnectionPool.release"]
    await client.delete("gw-test:connection")


async def test_a_write_redis_does_not_take_within_the_timeout_fails_and_the_next_command_reconnects(
    stoppable: EmbeddedRedis,
) -> None:
    pool = aioredis.ConnectionPool.from_url(
        stoppable.url, socket_timeout=0.3, socket_connect_timeout=1, connection_class=Connection
    )
    client = aioredis.Redis(connection_pool=pool, retry=None)
    try:
        pid = int((await client.info("server"))["process_id"])
        os.kill(pid, signal.SIGSTOP)
        try:
            loop = asyncio.get_running_loop()
            started = loop.time()
            with pytest.raises(RedisTimeoutError, match="Timeout writing to socket"):
                # more than the socket buffers hold: the write waits for a reader that does not read
                await client.set("gw-test:big", b"x" * (64 << 20))
            assert loop.time() - started < 5
            assert all(not connection.is_connected for connection in pool._available_connections)
        finally:
            os.kill(pid, signal.SIGCONT)
        assert await client.set("gw-test:after", "1")
        assert await client.get("gw-test:after") == b"1"
    finally:
        await client.aclose()
