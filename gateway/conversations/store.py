"""Conversation cache state in Redis, under the tenant's hash tag (Cluster-safe, one slot per tenant).

- ``<prefix>:{tenant}:conv:<anchor>``: a conversation's ``ConversationState`` (JSON), expiring with the
  cache's retention (what it describes is gone from the provider by then);
- ``<prefix>:{tenant}:convs``: the tenant's conversations by last use; past ``max_per_tenant`` the oldest
  are dropped with their state, so a tenant's share of Redis is bounded;
- ``<prefix>:{tenant}:precompressed:<anchor>``: what background pre-compression has spent on the
  conversation (nano-USD), kept ``PRECOMPRESSED_TTL_SECONDS`` after its last addition: the policy caps it
  (``compress.precompress_max_usd``);
- ``<prefix>:{tenant}:open:<model>:<opening>``: the tokens of a prompt's opening prefix (tools, system
  prompt: ``fingerprint.opening_of``) that went to the model, expiring with the cache's retention: what an
  unknown conversation opening the same way shares with the requests the provider still holds;
- ``<prefix>:{tenant}:cacheshare``: per model, input and cached tokens of the tenant's requests forwarded
  unchanged (``<model>:in``, ``<model>:cached``): the cached share when a conversation is unknown; kept a
  week after its last update.

Every call is bounded in time and never raises: an unreadable state is reported as unknown. A write that
fails for a reason that may pass is tried again a few times over a few seconds (in the background).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import anyio
import redis.asyncio as aioredis
import structlog
from redis.exceptions import RedisError

from gateway.conversations.fingerprint import Chain, Opening
from gateway.conversations.state import ConversationState
from gateway.ledger.reply import integer
from gateway.ledger.script import Script
from gateway.redis import pipelined
from gateway.redis.pipelined import describe

TIMEOUT_SECONDS = 0.25
RETRY_PAUSES = (0.25, 1.0, 2.0)
"""Pauses before each new try of a failed write."""
SHARE_TTL_SECONDS = 7 * 24 * 3600
PRECOMPRESSED_TTL_SECONDS = 24 * 3600
SHARE_MIN_INPUT = 100_000
"""Input tokens the tenant's unchanged requests must add up to before their cached share is trusted."""

_WRITE = Script(
    """
-- KEYS: 1 state, 2 index, 3 opening (optional); ARGV: 1 state JSON, 2 ttl ms, 3 anchor, 4 now ms,
--       5 max conversations, 6 state key prefix, 7 opening tokens, 8 opening ttl ms
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
if #KEYS >= 3 then redis.call('SET', KEYS[3], ARGV[7], 'PX', ARGV[8]) end
redis.call('ZADD', KEYS[2], ARGV[4], ARGV[3])
redis.call('PEXPIRE', KEYS[2], ARGV[2])
local excess = redis.call('ZCARD', KEYS[2]) - tonumber(ARGV[5])
if excess > 0 then
  local dropped = redis.call('ZPOPMIN', KEYS[2], excess)
  for i = 1, #dropped, 2 do redis.call('DEL', ARGV[6] .. dropped[i]) end
end
return 1
"""
)


@dataclass(frozen=True, slots=True)
class Recalled:
    """What was read of a conversation: ``available`` False when Redis could not be asked."""

    state: ConversationState | None
    share: float | None
    available: bool = True
    opening_tokens: int | None = None
    """Tokens of the request's opening prefix that went to the model within the retention (asked only
    when the conversation itself is unknown)."""
    precompressed_nanos: int = 0
    """What background pre-compression has spent on the conversation."""


UNAVAILABLE = Recalled(None, None, available=False)


@dataclass(frozen=True, slots=True)
class Looked:
    """A conversation as read for one request: its name, the request's chain, what the store said."""

    anchor: str
    chain: Chain
    recalled: Recalled


@dataclass(frozen=True, slots=True)
class ShareUpdate:
    model: str
    input_tokens: int
    cached_tokens: int


class ConversationStore:
    def __init__(
        self,
        redis: aioredis.Redis,
        *,
        prefix: str = "gw",
        max_per_tenant: Callable[[], int] = lambda: 10_000,
    ) -> None:
        """``max_per_tenant``: read at every write, so that a reloaded config applies."""
        self._redis = redis
        self._prefix = prefix
        self._max_per_tenant = max_per_tenant
        self._log = structlog.get_logger("gateway.conversations")

    def _keys(self, tenant: str) -> tuple[str, str, str]:
        base = f"{self._prefix}:{{{tenant}}}"
        return f"{base}:conv:", f"{base}:convs", f"{base}:cacheshare"

    def _opening_key(self, tenant: str, model: str, opening: str) -> str:
        return f"{self._prefix}:{{{tenant}}}:open:{model}:{opening}"

    async def recall(self, tenant: str, anchor: str, model: str, opening: str | None = None) -> Recalled:
        """The conversation's state, the tenant's cached share for ``model``, and the tokens of the
        ``opening`` prefix (its name: ``Opening.name``) held for ``model``."""
        state_prefix, _, share_key = self._keys(tenant)
        try:
            with anyio.fail_after(TIMEOUT_SECONDS):
                async with self._redis.pipeline(transaction=False) as pipe:
                    pipe.get(state_prefix + anchor)
                    pipe.hmget(share_key, [f"{model}:in", f"{model}:cached"])
                    pipe.get(self._precompressed_key(tenant, anchor))
                    if opening is not None:
                        pipe.get(self._opening_key(tenant, model, opening))
                    raw, (fed, cached), spent, *opened = await pipe.execute()
        except (RedisError, OSError, TimeoutError) as exc:
            self._log.warning("conversation_state_unavailable", error=type(exc).__name__)
            return UNAVAILABLE
        state = ConversationState.from_json(raw) if raw is not None else None
        held = integer(opened[0]) if opened and opened[0] is not None else None
        return Recalled(state, _share(fed, cached), opening_tokens=held, precompressed_nanos=integer(spent))

    def _precompressed_key(self, tenant: str, anchor: str) -> str:
        return f"{self._prefix}:{{{tenant}}}:precompressed:{anchor}"

    async def add_precompressed(self, tenant: str, anchor: str, nanos: int) -> None:
        """Add what one background pre-compression spent to its conversation's total."""
        key = self._precompressed_key(tenant, anchor)

        async def add() -> None:
            async with self._redis.pipeline(transaction=True) as pipe:
                pipe.incrby(key, nanos)
                pipe.expire(key, PRECOMPRESSED_TTL_SECONDS)
                await pipelined.execute_checked(pipe)

        await self._write(add, what="precompressed")

    async def remember(
        self,
        tenant: str,
        anchor: str,
        state: ConversationState,
        *,
        ttl_seconds: float,
        now_ms: int,
        opening: Opening | None = None,
        opening_seconds: float = 0.0,
    ) -> bool:
        """Keep ``state`` for ``ttl_seconds``, and the ``opening`` prefix of what went to its model for
        ``opening_seconds`` (the cache's retention)."""
        state_prefix, index_key, _ = self._keys(tenant)
        keys = [state_prefix + anchor, index_key]
        args: list[str | int] = [
            state.to_json().decode(),
            max(1, int(ttl_seconds * 1000)),
            anchor,
            now_ms,
            self._max_per_tenant(),
            state_prefix,
        ]
        if opening is not None and opening_seconds > 0:
            model = state.sent.model if state.sent is not None else state.client.model
            keys.append(self._opening_key(tenant, model, opening.name))
            args.extend([opening.tokens, max(1, int(opening_seconds * 1000))])
        return await self._write(lambda: _WRITE.run(self._redis, keys, args), what="state")

    async def add_share(self, tenant: str, share: ShareUpdate) -> None:
        """Add one unchanged request's input and cached tokens to the tenant's share for its model, both
        or neither (``MULTI``/``EXEC`` on one key), so that a try after a failure never counts twice."""
        share_key = self._keys(tenant)[2]

        async def add() -> None:
            async with self._redis.pipeline(transaction=True) as pipe:
                pipe.hincrby(share_key, f"{share.model}:in", share.input_tokens)
                pipe.hincrby(share_key, f"{share.model}:cached", share.cached_tokens)
                pipe.expire(share_key, SHARE_TTL_SECONDS)
                await pipelined.execute_checked(pipe)

        await self._write(add, what="share")

    async def _write(self, write: Callable[[], Awaitable[object]], *, what: str) -> bool:
        """Run ``write`` (bounded in time), again after a pause while the failure may pass (a cluster
        failing over takes a second or two); whether it was written. Writes run beside or after the
        request, never in its way."""

        async def bounded() -> None:
            with anyio.fail_after(TIMEOUT_SECONDS * 4):
                await write()

        failure = await pipelined.retried(bounded, RETRY_PAUSES)
        if failure is not None:
            self._log.warning("conversation_state_unavailable", write=what, error=describe(failure))
        return failure is None


def _share(fed: object, cached: object) -> float | None:
    total, hits = integer(fed), integer(cached)
    if total < SHARE_MIN_INPUT:
        return None
    return min(1.0, max(0.0, hits / total))
