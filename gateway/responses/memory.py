"""What the gateway remembers of each response it relayed: who served it and how large it was.

A ``previous_response_id`` names history the upstream stores and the gateway never sees; what was
remembered of that response (its input and output tokens) estimates the size of that history, and its
provider is where calls about it (retrieve, cancel, delete, the next turn) must go. One small JSON value
per response, under the tenant's hash tag (``gw:{tenant}:resp:<id>``), kept as long as the upstream
keeps responses (30 days by default).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import orjson
import redis.asyncio as aioredis
import structlog
from redis.exceptions import RedisError

from gateway.record import RequestRecord

DEFAULT_TTL_SECONDS = 30 * 24 * 3600
MAX_ID_LENGTH = 256

log = structlog.get_logger("gateway.responses")


@dataclass(frozen=True, slots=True)
class Remembered:
    provider: str
    model: str
    """The public name of the model that produced the response."""
    input_tokens: int
    output_tokens: int

    @property
    def history_tokens(self) -> int:
        """The history a next turn chained to this response carries: its input and its output.

        Reasoning tokens are part of the output tokens: an upper estimate, which is the safe side of a
        price cliff."""
        return self.input_tokens + self.output_tokens


def response_key(tenant: str, response_id: str) -> str:
    return f"gw:{{{tenant}}}:resp:{response_id}"


class ResponseMemory:
    """Remembers and recalls responses by id; Redis errors are logged, never raised to the client."""

    def __init__(self, redis: aioredis.Redis, *, ttl_seconds: int = DEFAULT_TTL_SECONDS) -> None:
        self._redis = redis
        self._ttl = ttl_seconds

    async def remember(self, tenant: str, response_id: str, value: Remembered) -> None:
        if not response_id or len(response_id) > MAX_ID_LENGTH:
            return
        data = orjson.dumps(
            {"p": value.provider, "m": value.model, "i": value.input_tokens, "o": value.output_tokens}
        )
        try:
            await self._redis.set(response_key(tenant, response_id), data, ex=self._ttl)
        except RedisError as exc:
            log.warning("response_memory_unavailable", error=type(exc).__name__)

    async def recall(self, tenant: str, response_id: object) -> Remembered | None:
        if not isinstance(response_id, str) or not response_id or len(response_id) > MAX_ID_LENGTH:
            return None
        try:
            raw = await self._redis.get(response_key(tenant, response_id))
        except RedisError as exc:
            log.warning("response_memory_unavailable", error=type(exc).__name__)
            return None
        if raw is None:
            return None
        try:
            data = orjson.loads(raw)
            return Remembered(
                provider=str(data["p"]),
                model=str(data["m"]),
                input_tokens=int(data["i"]),
                output_tokens=int(data["o"]),
            )
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            return None


def remembering(
    memory: ResponseMemory, record: RequestRecord, *, keep: bool
) -> Callable[[str], Awaitable[None]]:
    """What remembers the response of ``record`` by its id, once its usage is known (nothing when the
    upstream does not store it: ``store: false``)."""

    async def remember(response_id: str) -> None:
        if not keep or record.tenant is None or record.called_model is None:
            return
        usage = record.usage
        value = Remembered(
            provider=record.provider or "",
            model=record.called_model,
            input_tokens=usage.input_tokens if usage else (record.forwarded_tokens or 0),
            output_tokens=usage.output_tokens if usage else 0,
        )
        await memory.remember(record.tenant.name, response_id, value)

    return remember
