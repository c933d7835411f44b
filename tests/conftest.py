"""Shared fixtures: a real Redis server (the configured one if it answers, else an embedded one), and a
client of one that is down."""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from urllib.parse import urlparse

import pytest
import redis.asyncio as aioredis

from gateway.redisserver import EmbeddedRedis, free_port
from tests.redis_db import claim_database


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def _clean_gateway_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Hygiene: no GATEWAY_* setting leaks from the developer's shell into a test."""
    for name in list(os.environ):
        if name.startswith("GATEWAY_") and name != "GATEWAY_TEST_REDIS_URL":
            monkeypatch.delenv(name, raising=False)


def _answers(url: str) -> bool:
    parsed = urlparse(url)
    try:
        with socket.create_connection(
            (parsed.hostname or "127.0.0.1", parsed.port or 6379), timeout=0.3
        ) as s:
            s.sendall(b"PING\r\n")
            return s.recv(64).startswith((b"+PONG", b"-NOAUTH"))
    except OSError:
        return False


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real Redis: GATEWAY_TEST_REDIS_URL or GATEWAY_REDIS_URL or 127.0.0.1:6379, else an embedded one.
    On a server that answers, the run writes to a database of its own, emptied at the end
    (``tests.redis_db``); with none free there, it starts an embedded one."""
    candidates = [
        os.environ.get("GATEWAY_TEST_REDIS_URL"),
        os.environ.get("GATEWAY_REDIS_URL"),
        "redis://127.0.0.1:6379/0",
    ]
    for url in candidates:
        if url and url.startswith("redis://") and _answers(url):
            claim = claim_database(url)
            if claim is None:
                break
            try:
                yield claim.url
            finally:
                claim.release()
            return
    data_dir: Path = tmp_path_factory.mktemp("redis")
    with EmbeddedRedis(data_dir, port=free_port(), persist=False) as server:
        yield server.url


@pytest.fixture
async def redis_client(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    client = aioredis.Redis.from_url(redis_url)
    try:
        yield client
    finally:
        await client.aclose()


@pytest.fixture
def dead_redis_url() -> str:
    """The URL of a port nothing listens on: every connection is refused at once."""
    return f"redis://127.0.0.1:{free_port()}/0"


@pytest.fixture
async def dead_redis(dead_redis_url: str) -> AsyncIterator[aioredis.Redis]:
    """A client of a Redis that is down (``dead_redis_url``), without retries."""
    client = aioredis.Redis.from_url(dead_redis_url, socket_connect_timeout=0.2, retry=None)
    try:
        yield client
    finally:
        await client.aclose()


@pytest.fixture
def tenant_name() -> str:
    """A tenant name no other test (or concurrent run) uses, so tests share a Redis safely."""
    return f"t-{uuid.uuid4().hex[:12]}"
