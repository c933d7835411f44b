"""The compressors' cache on Redis: summaries and retrieval indexes, every key under the tenant's hash tag.

A cache is an optimisation, so a Redis that is down or slow never fails a request here: a read becomes a
miss, a write is skipped, and a lock that cannot be taken is treated as taken by us (the work is done
without single flight). Each of these is logged once per occurrence at warning level.
"""

from __future__ import annotations

import secrets

import redis.asyncio as aioredis
import structlog
from redis.exceptions import RedisError

log = structlog.get_logger("gateway.cache")

_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


class RedisCache:
    """``compressors.protocols.Cache`` on Redis for one tenant and one area (``summary``, ``retrieval``)."""

    def __init__(self, redis: aioredis.Redis, tenant: str, area: str) -> None:
        self._redis = redis
        self._prefix = f"gw:{{{tenant}}}:{area}:"
        self._tokens: dict[str, str] = {}

    async def get(self, key: str) -> bytes | None:
        try:
            value = await self._redis.get(self._prefix + key)
        except (RedisError, OSError) as exc:
            log.warning("cache_unavailable", op="get", error=type(exc).__name__)
            return None
        return value.encode() if isinstance(value, str) else value

    async def set(self, key: str, value: bytes, *, ttl_seconds: int) -> None:
        try:
            await self._redis.set(self._prefix + key, value, ex=ttl_seconds)
        except (RedisError, OSError) as exc:
            log.warning("cache_unavailable", op="set", error=type(exc).__name__)

    async def acquire(self, key: str, *, ttl_seconds: float) -> bool:
        token = secrets.token_hex(8)
        try:
            taken = await self._redis.set(
                self._prefix + "lock:" + key, token, nx=True, px=max(1, int(ttl_seconds * 1000))
            )
        except (RedisError, OSError) as exc:
            log.warning("cache_unavailable", op="lock", error=type(exc).__name__)
            return True
        if taken:
            self._tokens[key] = token
        return bool(taken)

    async def release(self, key: str) -> None:
        token = self._tokens.pop(key, None)
        if token is None:
            return
        try:  # only the holder frees a lock, and only its own
            await self._redis.eval(_RELEASE, 1, self._prefix + "lock:" + key, token)
        except (RedisError, OSError) as exc:
            log.warning("cache_unavailable", op="unlock", error=type(exc).__name__)
