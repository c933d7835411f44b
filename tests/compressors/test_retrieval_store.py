from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import pytest
import redis.asyncio as aioredis

from compressors.lru import Lru
from compressors.retrieval.store import Store


@dataclass
class RedisCache:
    """The Cache protocol over a real Redis, as the gateway would supply it (keys under a prefix)."""

    client: aioredis.Redis
    prefix: str

    async def get(self, key: str) -> bytes | None:
        value = await self.client.get(f"{self.prefix}:{key}")
        if value is None or isinstance(value, bytes):
            return value
        raise TypeError("the Redis client must return bytes (decode_responses off)")

    async def set(self, key: str, value: bytes, *, ttl_seconds: int) -> None:
        await self.client.set(f"{self.prefix}:{key}", value, ex=ttl_seconds)

    async def acquire(self, key: str, *, ttl_seconds: float) -> bool:
        return bool(await self.client.set(f"{self.prefix}:{key}", b"1", nx=True, px=int(ttl_seconds * 1000)))

    async def release(self, key: str) -> None:
        await self.client.delete(f"{self.prefix}:{key}")


@dataclass
class Builds:
    """A builder that records its calls; it can be slowed down or made to fail."""

    value: str = "built"
    delay: float = 0.0
    failures: int = 0
    calls: list[str] = field(default_factory=list)

    async def __call__(self) -> str:
        self.calls.append(self.value)
        await asyncio.sleep(self.delay)
        if self.failures:
            self.failures -= 1
            raise RuntimeError("build failed")
        return self.value


def _store(cache: RedisCache | None, *, memory: int = 4, wait: float = 1.0) -> Store[str]:
    return Store(
        cache=cache,
        memory_entries=memory,
        ttl_seconds=60,
        lock_wait_seconds=wait,
        encode=str.encode,
        decode=_decode,
    )


def _decode(data: bytes) -> str:
    if data.startswith(b"bad"):
        raise ValueError("not a value")
    return data.decode()


@pytest.fixture
def cache(redis_client: aioredis.Redis, tenant_name: str) -> RedisCache:
    return RedisCache(redis_client, tenant_name)


def test_lru_keeps_the_most_recently_used() -> None:
    lru: Lru[int] = Lru(2)
    lru.put("a", 1)
    lru.put("b", 2)
    assert lru.get("a") == 1
    lru.put("c", 3)
    assert lru.get("b") is None
    assert (lru.get("a"), lru.get("c"), len(lru)) == (1, 3, 2)


def test_lru_of_capacity_zero_keeps_nothing() -> None:
    lru: Lru[int] = Lru(0)
    lru.put("a", 1)
    assert lru.get("a") is None
    assert len(lru) == 0


@pytest.mark.anyio
async def test_store_builds_once_then_answers_from_memory(cache: RedisCache) -> None:
    store, build = _store(cache), Builds()
    assert await store.get("k", build) == ("built", "built")
    assert await store.get("k", build) == ("built", "memory")
    assert build.calls == ["built"]


@pytest.mark.anyio
async def test_store_shares_built_values_through_the_cache(cache: RedisCache) -> None:
    await _store(cache).get("k", Builds("shared"))
    other, build = _store(cache), Builds("never")
    assert await other.get("k", build) == ("shared", "cache")
    assert build.calls == []
    assert await cache.get("k") == b"shared"


@pytest.mark.anyio
async def test_store_without_cache_builds_per_process(cache: RedisCache) -> None:
    build = Builds()
    assert await _store(None).get("k", build) == ("built", "built")
    assert await _store(None).get("k", build) == ("built", "built")
    assert len(build.calls) == 2
    assert await cache.get("k") is None


@pytest.mark.anyio
async def test_store_single_flight_in_process(cache: RedisCache) -> None:
    store, build = _store(cache), Builds(delay=0.1)
    results = await asyncio.gather(*(store.get("k", build) for _ in range(5)))
    assert build.calls == ["built"]
    assert sorted(source for _, source in results) == ["built", "memory", "memory", "memory", "memory"]


@pytest.mark.anyio
async def test_store_waits_for_another_replica_holding_the_lock(cache: RedisCache) -> None:
    assert await cache.acquire("k:lock", ttl_seconds=5)

    async def other_replica() -> None:
        await asyncio.sleep(0.2)
        await cache.set("k", b"from-replica", ttl_seconds=60)
        await cache.release("k:lock")

    build = Builds()
    (value, source), _ = await asyncio.gather(_store(cache, wait=2.0).get("k", build), other_replica())
    assert (value, source) == ("from-replica", "cache")
    assert build.calls == []


class RacedCache(RedisCache):
    """Another replica stores ``k`` and releases its lock between this one's first look and its lock."""

    async def acquire(self, key: str, *, ttl_seconds: float) -> bool:
        if key == "k:lock" and await self.get("k") is None:
            await self.set("k", b"from-replica", ttl_seconds=60)
        return await super().acquire(key, ttl_seconds=ttl_seconds)


@pytest.mark.anyio
async def test_store_looks_again_after_taking_the_lock(
    redis_client: aioredis.Redis, tenant_name: str
) -> None:
    cache, build = RacedCache(redis_client, tenant_name), Builds()
    assert await _store(cache).get("k", build) == ("from-replica", "cache")
    assert build.calls == []
    assert await cache.get("k") == b"from-replica"
    assert await cache.get("k:lock") is None


@pytest.mark.anyio
async def test_store_builds_itself_when_the_lock_holder_is_too_slow(cache: RedisCache) -> None:
    assert await cache.acquire("k:lock", ttl_seconds=5)
    build = Builds()
    assert await _store(cache, wait=0.2).get("k", build) == ("built", "built")
    assert build.calls == ["built"]
    assert await cache.get("k") == b"built"
    assert await cache.get("k:lock") == b"1"  # not ours to release


@pytest.mark.anyio
async def test_store_releases_its_lock_after_building(cache: RedisCache) -> None:
    await _store(cache).get("k", Builds())
    assert await cache.get("k:lock") is None


@pytest.mark.anyio
async def test_store_rebuilds_an_entry_it_cannot_decode(cache: RedisCache) -> None:
    await cache.set("k", b"bad entry", ttl_seconds=60)
    build = Builds("fresh")
    assert await _store(cache).get("k", build) == ("fresh", "built")
    assert await cache.get("k") == b"fresh"


@pytest.mark.anyio
async def test_store_failed_build_raises_releases_and_lets_waiters_retry(cache: RedisCache) -> None:
    store, build = _store(cache), Builds(delay=0.05, failures=1)
    first, second = await asyncio.gather(store.get("k", build), store.get("k", build), return_exceptions=True)
    assert isinstance(first, RuntimeError)
    assert second == ("built", "built")
    assert len(build.calls) == 2
    assert await cache.get("k:lock") is None


@pytest.mark.anyio
async def test_store_memory_of_zero_entries_asks_the_cache_each_time(cache: RedisCache) -> None:
    store, build = _store(cache, memory=0), Builds()
    assert (await store.get("k", build))[1] == "built"
    assert (await store.get("k", build))[1] == "cache"
