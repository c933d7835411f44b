"""The compressors' Redis cache: per-tenant keys, token-checked locks, and misses (not failures) when
Redis is gone."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis.asyncio as aioredis

from gateway.core.cache import RedisCache
from gateway.redis.server import EmbeddedRedis
from tests.ports import free_port


@pytest.mark.anyio
async def test_cache_round_trip_under_the_tenant_tag(redis_client: aioredis.Redis, tenant_name: str) -> None:
    cache = RedisCache(redis_client, tenant_name, "summary")
    assert await cache.get("k") is None
    await cache.set("k", b"value", ttl_seconds=60)
    assert await cache.get("k") == b"value"
    assert await redis_client.get(f"gw:{{{tenant_name}}}:summary:k") == b"value"
    assert 0 < await redis_client.ttl(f"gw:{{{tenant_name}}}:summary:k") <= 60
    other = RedisCache(redis_client, f"{tenant_name}-other", "summary")
    assert await other.get("k") is None


@pytest.mark.anyio
async def test_lock_is_exclusive_and_freed_only_by_its_holder(
    redis_client: aioredis.Redis, tenant_name: str
) -> None:
    first, second = (
        RedisCache(redis_client, tenant_name, "summary"),
        RedisCache(redis_client, tenant_name, "summary"),
    )
    assert await first.acquire("p", ttl_seconds=5)
    assert not await second.acquire("p", ttl_seconds=5)
    await second.release("p")  # not the holder: nothing happens
    assert not await second.acquire("p", ttl_seconds=5)
    await first.release("p")
    assert await second.acquire("p", ttl_seconds=5)


@pytest.mark.anyio
async def test_a_dead_redis_is_a_miss_not_a_failure(tmp_path: Path) -> None:
    server = EmbeddedRedis(tmp_path, port=free_port(), persist=False)
    server.start()
    client = aioredis.Redis.from_url(server.url, socket_timeout=1, socket_connect_timeout=1)
    cache = RedisCache(client, "t", "summary")
    await cache.set("k", b"v", ttl_seconds=60)
    server.stop()
    try:
        assert await cache.get("k") is None
        await cache.set("k", b"v", ttl_seconds=60)
        assert await cache.acquire("p", ttl_seconds=1)  # proceed without single flight
        await cache.release("p")
    finally:
        await client.aclose()
