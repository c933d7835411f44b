"""The per-tenant limit on token counting calls (``POST /v1/messages/count_tokens``,
``POST /v1/responses/input_tokens``).

Counting is free at the provider and unbilled here, but each call costs the gateway a parse and a count of
a body that may be megabytes, and the provider's answer comes out of a per-organisation quota every tenant
shares. So each tenant gets ``limits.token_counts_per_minute`` of them (or its own
``token_counts_per_minute``) in fixed one-minute windows.

The window is counted in Redis (``gw:{tenant}:counts:<minute>``, one ``INCR`` with its expiry in one
script, under the tenant's hash tag): exact over every worker and replica, as a limit ops set for "the
gateway" must be; an in-process bucket would allow the limit once per process. Only these calls pay that
round trip. While Redis does not answer, each process counts the window itself (the limit then holds per
process), so a Redis outage neither opens the gate nor closes it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import structlog
from redis.asyncio import Redis
from redis.exceptions import RedisError

from gateway.base.errors import RateLimited
from gateway.ledger.script import Script

COUNT_ENDPOINTS = frozenset({"messages_count_tokens", "responses_input_tokens"})
"""The records' ``endpoint`` of token counting calls (counted by tenant in the metrics)."""
WINDOW_SECONDS = 60
REDIS_TIMEOUT_SECONDS = 1.0

_COUNT = Script(
    """
local calls = redis.call('INCR', KEYS[1])
if calls == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
return calls
"""
)

log = structlog.get_logger("gateway.counts")


class CountLimiter:
    def __init__(self, redis: Redis, *, prefix: str = "gw", clock: Callable[[], float] = time.time) -> None:
        self._redis = redis
        self._prefix = prefix
        self._clock = clock
        self._local: dict[tuple[str, int], int] = {}

    async def admit(self, tenant: str, per_minute: int) -> None:
        """Count one call of ``tenant``; raises ``RateLimited`` (429, with ``retry-after``) past
        ``per_minute`` in the current window."""
        now = self._clock()
        window = int(now // WINDOW_SECONDS)
        calls = await self._count(tenant, window)
        if calls > per_minute:
            retry_after = max(1, int((window + 1) * WINDOW_SECONDS - now + 0.999))
            raise RateLimited(
                f"Token counting is limited to {per_minute} calls a minute for this tenant; "
                f"try again in {retry_after} s.",
                retry_after=retry_after,
            )

    async def _count(self, tenant: str, window: int) -> int:
        key = f"{self._prefix}:{{{tenant}}}:counts:{window}"
        try:
            async with asyncio.timeout(REDIS_TIMEOUT_SECONDS):
                calls = await _COUNT.run(self._redis, [key], [2 * WINDOW_SECONDS * 1000])
            if type(calls) is int:
                return calls
            error = f"unexpected reply {type(calls).__name__}"
        except (RedisError, OSError, TimeoutError) as exc:
            error = type(exc).__name__
        log.warning("count_limit_redis_unavailable", error=error)
        return self._count_here(tenant, window)

    def _count_here(self, tenant: str, window: int) -> int:
        """This process's own count of the window (older windows are dropped)."""
        if any(seen != window for _, seen in self._local):
            self._local = {slot: calls for slot, calls in self._local.items() if slot[1] == window}
        calls = self._local.get((tenant, window), 0) + 1
        self._local[(tenant, window)] = calls
        return calls
