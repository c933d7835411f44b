"""Get-or-build for values worth keeping: an in-process LRU, in-process single flight, and the shared
Cache (single flight across replicas, ``compressors.flight``: one builds while the others wait for its
result)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Generic, Literal, TypeVar

from compressors.flight import single_flight
from compressors.lru import Lru
from compressors.protocols import Cache

Value = TypeVar("Value")
Source = Literal["memory", "cache", "built"]

_LOCK_TTL_SECONDS = 60.0
_POLL_SECONDS = 0.05


class Store(Generic[Value]):
    """Values by key: from memory, else from the shared cache, else built (once) and shared.

    An entry that cannot be decoded (another format, damage) counts as missing and is overwritten.
    Errors of the Cache itself propagate: the gateway's Cache decides whether Redis being down is
    a miss.
    """

    def __init__(
        self,
        *,
        cache: Cache | None,
        memory_entries: int,
        ttl_seconds: int,
        lock_wait_seconds: float,
        encode: Callable[[Value], bytes],
        decode: Callable[[bytes], Value],
    ) -> None:
        self._cache = cache
        self._memory: Lru[Value] = Lru(memory_entries)
        self._ttl = ttl_seconds
        self._lock_wait = lock_wait_seconds
        self._encode = encode
        self._decode = decode
        self._pending: dict[str, asyncio.Future[Value | None]] = {}

    async def get(self, key: str, build: Callable[[], Awaitable[Value]]) -> tuple[Value, Source]:
        remembered = self._memory.get(key)
        if remembered is not None:
            return remembered, "memory"
        pending = self._pending.get(key)
        if pending is not None:
            shared = await asyncio.shield(pending)
            if shared is not None:
                return shared, "memory"
            return await self.get(key, build)
        future: asyncio.Future[Value | None] = asyncio.get_running_loop().create_future()
        self._pending[key] = future
        value: Value | None = None
        try:
            value, source = await self._fetch(key, build)
            self._memory.put(key, value)
            return value, source
        finally:
            del self._pending[key]
            future.set_result(value)

    async def _fetch(self, key: str, build: Callable[[], Awaitable[Value]]) -> tuple[Value, Source]:
        cache = self._cache
        if cache is None:
            return await build(), "built"

        async def produce() -> Value:
            value = await build()
            await cache.set(key, self._encode(value), ttl_seconds=self._ttl)
            return value

        value, built = await single_flight(
            cache,
            lock=f"{key}:lock",
            lookup=partial(self._load, cache, key),
            produce=produce,
            lock_ttl=_LOCK_TTL_SECONDS,
            wait=self._lock_wait,
            poll_interval=_POLL_SECONDS,
        )
        return value, "built" if built else "cache"

    async def _load(self, cache: Cache, key: str) -> Value | None:
        data = await cache.get(key)
        if data is None:
            return None
        try:
            return self._decode(data)
        except ValueError:
            return None
