"""Stored answers in Redis, under the tenant's hash tag (one slot per tenant on a Cluster):

- ``<prefix>:{tenant}:rcache:<sha256>``: an ``Entry``, expiring after the tenant's ``ttl_seconds``;
- ``<prefix>:{tenant}:rcache-index``: the tenant's stored keys by time stored; past ``max_entries`` the
  oldest are dropped with their answers, so a tenant's share of Redis is bounded by
  ``max_entries`` times ``max_entry_bytes``.

A cache is an optimisation: a Redis that is down or slow never fails a request here. A read that fails is
a miss, a write that fails is skipped; both are logged at warning level.
"""

from __future__ import annotations

import anyio
import redis.asyncio as aioredis
import structlog
from redis.exceptions import RedisError

from gateway.config.schema.response_cache import ResponseCacheConfig
from gateway.ledger.script import Script
from gateway.responsecache.entry import Entry

READ_TIMEOUT_SECONDS = 0.1
"""A hit must be faster than the upstream: a read slower than this is a miss."""
WRITE_TIMEOUT_SECONDS = 1.0

_PUT = Script(
    """
-- KEYS: 1 entry, 2 index; ARGV: 1 entry bytes, 2 ttl ms, 3 now ms, 4 max entries
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
redis.call('ZADD', KEYS[2], ARGV[3], KEYS[1])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', '(' .. (tonumber(ARGV[3]) - tonumber(ARGV[2])))
redis.call('PEXPIRE', KEYS[2], ARGV[2])
local excess = redis.call('ZCARD', KEYS[2]) - tonumber(ARGV[4])
if excess > 0 then
  local dropped = redis.call('ZPOPMIN', KEYS[2], excess)
  for i = 1, #dropped, 2 do redis.call('DEL', dropped[i]) end
end
return 1
"""
)


def index_key(key: str) -> str:
    """The index beside an entry's key (the same prefix and hash tag)."""
    return key.rpartition(":rcache:")[0] + ":rcache-index"


class ResponseCacheStore:
    def __init__(self, redis: aioredis.Redis) -> None:
        self._redis = redis
        self._log = structlog.get_logger("gateway.responsecache")

    async def get(self, key: str) -> Entry | None:
        try:
            with anyio.fail_after(READ_TIMEOUT_SECONDS):
                raw = await self._redis.get(key)
        except (RedisError, OSError, TimeoutError) as exc:
            self._log.warning("response_cache_unavailable", op="read", error=type(exc).__name__)
            return None
        if isinstance(raw, str):
            raw = raw.encode()
        return Entry.from_bytes(raw) if isinstance(raw, bytes) else None

    async def put(self, key: str, entry: Entry, config: ResponseCacheConfig) -> bool:
        """Keep ``entry`` under ``key`` for the tenant's TTL; whether it was (too large: not tried)."""
        data = entry.to_bytes()
        if len(data) > config.max_entry_bytes:
            return False
        args: list[str | int] = [
            data.decode(),
            config.ttl_seconds * 1000,
            entry.stored_ms,
            config.max_entries,
        ]
        try:
            with anyio.fail_after(WRITE_TIMEOUT_SECONDS):
                await _PUT.run(self._redis, [key, index_key(key)], args)
        except (RedisError, OSError, TimeoutError) as exc:
            self._log.warning("response_cache_unavailable", op="write", error=type(exc).__name__)
            return False
        return True
