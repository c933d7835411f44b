"""Single flight over the shared cache: of many requests (in any replica) needing the same value, one
produces it.

The winner takes the cache's lock, looks once more (another may have stored the value and released
the lock since the first look), produces and stores the value, then releases. The others poll the
cache; each poll also tries the lock, so a winner that failed (and released) is replaced at once.
After ``wait`` seconds without a value a request produces it on its own.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

from compressors.protocols import Cache

T = TypeVar("T")


async def single_flight(
    cache: Cache,
    *,
    lock: str,
    lookup: Callable[[], Awaitable[T | None]],
    produce: Callable[[], Awaitable[T]],
    lock_ttl: float,
    wait: float,
    poll_interval: float,
) -> tuple[T, bool]:
    """The value and whether this call produced it (False: it came from the cache).

    ``produce`` stores what it makes; ``lock_ttl`` bounds how long a crashed winner blocks the others.
    """
    found = await lookup()
    if found is not None:
        return found, False
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait
    while True:
        if await cache.acquire(lock, ttl_seconds=lock_ttl):
            try:
                found = await lookup()
                if found is not None:
                    return found, False
                return await produce(), True
            finally:
                await cache.release(lock)
        if loop.time() >= deadline:
            return await produce(), True
        await asyncio.sleep(poll_interval)
        found = await lookup()
        if found is not None:
            return found, False
