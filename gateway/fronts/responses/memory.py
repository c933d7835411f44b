"""What the gateway remembers of each response it relayed: who served it and how large it was.

A ``previous_response_id`` names history the upstream stores and the gateway never sees; what was
remembered of that response (its input and output tokens) estimates the size of that history, and its
provider is where calls about it (retrieve, cancel, delete, the next turn) must go. One small JSON value
per response, under the tenant's hash tag (``gw:{tenant}:resp:<id>``, ``gw`` being the ledger's
``key_prefix``), kept as long as the upstream
keeps responses (30 days by default).

A response still running upstream (``background: true``) is remembered with what its cost event needs
(``Pending``) and queued in one sorted set, ``gw:responses:pending``, scored by when to look at it next
(``gateway.fronts.responses.pending`` settles it).

On a Redis Cluster every write ends with ``WAIT`` (``gateway.redis.replication``): a value a master took but
no replica confirmed is also kept by ``UnwrittenResponses`` and written again until a replica confirms a write
(or, after ``CONFIRM_SECONDS`` without one, counts as written on its live master), so that a master killed
before passing it on does not take it with it.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import anyio
import orjson
import redis.asyncio as aioredis
import structlog
from redis.exceptions import RedisClusterException, RedisError

from gateway.base.record import RequestRecord
from gateway.fronts.responses.unwritten import UnwrittenResponses
from gateway.redis import pipelined
from gateway.redis.pipelined import describe
from gateway.redis.replication import add_waits, nodes_to_confirm, refresh_topology, unconfirmed

DEFAULT_TTL_SECONDS = 30 * 24 * 3600
MAX_ID_LENGTH = 256
RUNNING = frozenset({"queued", "in_progress"})
"""Statuses of a response that has not ended."""
FIRST_LOOK_MS = 15_000
"""How soon after it was created the gateway first asks about a background response nobody polls."""

log = structlog.get_logger("gateway.responses")


@dataclass(frozen=True, slots=True)
class Pending:
    """What the cost event of a response still running upstream needs, from the request that made it."""

    request_id: str
    key_id: str
    requested_model: str
    action: str
    started_at: float
    prompt_tokens: int | None = None
    forwarded_tokens: int | None = None
    bill_tenant: str | None = None
    stream: bool = False
    client_request_id: str | None = None
    counterfactual: tuple[int, str] | None = None
    """A rewritten request's counterfactual cached tokens and their basis."""
    tags: dict[str, str] | None = None
    """The caller's cost tags (``RequestRecord.tags``)."""


@dataclass(frozen=True, slots=True)
class Remembered:
    provider: str
    model: str
    """The public name of the model that produced the response."""
    input_tokens: int
    output_tokens: int
    pending: Pending | None = None
    """Set while the response runs upstream and its cost is not recorded yet."""

    @property
    def history_tokens(self) -> int:
        """The history a next turn chained to this response carries: its input and its output.

        Reasoning tokens are part of the output tokens: an upper estimate, which is the safe side of a
        price cliff."""
        return self.input_tokens + self.output_tokens


def response_key(tenant: str, response_id: str, prefix: str = "gw") -> str:
    return f"{prefix}:{{{tenant}}}:resp:{response_id}"


def pending_key(prefix: str = "gw") -> str:
    """Sorted set of ``[tenant, response id]`` (JSON) still running upstream, scored by the next look (ms)."""
    return f"{prefix}:responses:pending"


PENDING_KEY = pending_key()
WRITE_SECONDS = 2.0
"""How long an answer waits for its response to be remembered in Redis, trying again while the failure may
pass (a cluster failing over, a busy machine); after that the value is kept by ``UnwrittenResponses`` (on
disk and in the process) and written from there."""
RETRY_PAUSES = (0.05, 0.1, 0.2, 0.4, 0.8)
CONFIRM_SECONDS = 30.0
"""On a Redis Cluster: how long values a master took but no replica confirmed are written again (a master
killed before passing them on would lose them) before they count as written without a replica."""

_CLAIM = """
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
for _, member in ipairs(due) do redis.call('ZADD', KEYS[1], ARGV[3], member) end
return due
"""


LAGGING = "no replica confirmed the write"


class Lagging(Exception):
    """The write went to a cluster master, but no replica confirmed it within the wait."""


class ResponseMemory:
    """Remembers and recalls responses by id; Redis errors are logged, never raised to the client."""

    def __init__(
        self,
        redis: aioredis.Redis,
        *,
        prefix: str = "gw",
        ttl_seconds: int = DEFAULT_TTL_SECONDS,
        spool_dir: Path | None = None,
    ) -> None:
        """``prefix``: the ledger's key prefix, so that gateways sharing a Redis keep apart; ``spool_dir``:
        where values Redis could not take wait (None: in this process only)."""
        self._redis = redis
        self._prefix = prefix
        self._pending = pending_key(prefix)
        self._ttl = ttl_seconds
        self.unwritten = UnwrittenResponses(spool_dir, self._write_held)
        self.unreplicated = 0
        self._lagging_since: float | None = None
        """When replicas stopped confirming the values written (None: they confirm)."""

    def start(self) -> None:
        self.unwritten.start()

    async def aclose(self) -> None:
        await self.unwritten.aclose()

    async def remember(
        self, tenant: str, response_id: str, value: Remembered, *, look_at_ms: int | None = None
    ) -> bool:
        """Whether it was remembered. A value is written to Redis before the answer goes (within
        ``WRITE_SECONDS``), else kept by ``UnwrittenResponses`` until Redis takes it: either way its owner
        can fetch it and chain to it. A pending value is also queued, to be looked at from ``look_at_ms``;
        it is not kept aside when Redis fails (False: the request is then billed at once). The queue entry
        goes first: an entry whose value never got written is dropped when looked at, while a pending
        value nobody would look at could never be billed."""
        if not response_id or len(response_id) > MAX_ID_LENGTH:
            return False
        data: dict[str, Any] = {
            "p": value.provider,
            "m": value.model,
            "i": value.input_tokens,
            "o": value.output_tokens,
        }
        if value.pending is not None:
            data["q"] = asdict(value.pending)
        key = response_key(tenant, response_id, self._prefix)
        encoded = orjson.dumps(data)
        queue = {_member(tenant, response_id): look_at_ms or 0} if value.pending is not None else None
        if self.unwritten.waiting:  # Redis failed moments ago: no answer waits for it again until it is back
            error: str | None = "Redis unavailable moments ago"
        else:
            error = await self._write_within(key, encoded, queue)
            if error is None:
                return True
            if error == LAGGING:  # on a live master only: kept until a replica confirms a write again
                if value.pending is None and not self._confirmed(False, 1):
                    self.unwritten.hold(tenant, response_id, encoded, self._ttl * 1000)
                return True
            log.warning("response_memory_unavailable", error=error)
        if value.pending is not None:
            return False
        self.unwritten.hold(tenant, response_id, encoded, self._ttl * 1000)
        return True

    async def _write_within(self, key: str, value: bytes, queue: dict[bytes, int] | None) -> str | None:
        """Write ``value`` (and the queue entry), trying again while that may help, for ``WRITE_SECONDS``
        at most; the last error, or None once written."""
        with anyio.move_on_after(WRITE_SECONDS):
            try:
                failure = await pipelined.retried(
                    lambda: self._write_one(key, value, queue),
                    RETRY_PAUSES,
                    before_retry=lambda: refresh_topology(self._redis),
                )
            except Lagging:
                return LAGGING
            return None if failure is None else describe(failure)
        return "timeout"

    async def _write_one(self, key: str, value: bytes, queue: dict[bytes, int] | None) -> None:
        async with self._redis.pipeline(transaction=False) as pipe:
            if queue is not None:
                pipe.zadd(self._pending, queue)
            pipe.set(key, value, ex=self._ttl)
            add_waits(pipe, nodes_to_confirm(self._redis, [key]))
            replies = await pipelined.execute_checked(pipe)
        if unconfirmed(replies[2 if queue is not None else 1 :]):
            raise Lagging()
        self._lagging_since = None

    async def _write_held(self, items: Sequence[tuple[str, str, bytes, int]]) -> int:
        """Write values kept aside, in one round trip; how many, from the first, were written."""
        if not items:
            return 0
        keys = [response_key(tenant, response_id, self._prefix) for tenant, response_id, _, _ in items]
        async with self._redis.pipeline(transaction=False) as pipe:
            for key, (_, _, value, ttl_ms) in zip(keys, items, strict=True):
                pipe.set(key, value, px=max(1, ttl_ms))
            add_waits(pipe, nodes_to_confirm(self._redis, keys))
            replies = (await pipelined.execute(pipe)).values
        if any(pipelined.is_failure(reply) for reply in replies[len(items) :]):
            return 0  # a replica's acknowledgement failed: the node may have died with the writes
        if not self._confirmed(unconfirmed(replies[len(items) :]) == 0, len(items)):
            return 0  # on a live master only: written again until a replica confirms them
        written = 0
        for reply in replies[: len(items)]:
            if pipelined.is_failure(reply):
                break
            written += 1
        return written

    def _confirmed(self, confirmed: bool, values: int) -> bool:
        """Whether written values count as written: a replica has them, or none has confirmed any write
        for ``CONFIRM_SECONDS`` (then they count as on a single Redis, and are logged)."""
        if confirmed:
            self._lagging_since = None
            return True
        now = time.monotonic()
        if self._lagging_since is None:
            self._lagging_since = now
        if now - self._lagging_since < CONFIRM_SECONDS:
            return False
        self.unreplicated += values
        log.warning("response_memory_unreplicated", values=values)
        return True

    async def recall(self, tenant: str, response_id: object) -> Remembered | None:
        if not isinstance(response_id, str) or not response_id or len(response_id) > MAX_ID_LENGTH:
            return None
        try:
            raw = await self._redis.get(response_key(tenant, response_id, self._prefix))
        except (RedisError, RedisClusterException) as exc:
            log.warning("response_memory_unavailable", error=type(exc).__name__)
            raw = None
        if raw is None:
            raw = self.unwritten.get(tenant, response_id)
        if raw is None:
            return None
        try:
            data = orjson.loads(raw)
            pending = data.get("q")
            return Remembered(
                provider=str(data["p"]),
                model=str(data["m"]),
                input_tokens=int(data["i"]),
                output_tokens=int(data["o"]),
                pending=Pending(**pending) if isinstance(pending, dict) else None,
            )
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError):
            return None

    async def claim_pending(self, now_ms: int, *, lease_ms: int, limit: int) -> list[tuple[str, str]]:
        """The pending responses due by ``now_ms``, put out of the others' sight for ``lease_ms`` (a
        replica that dies while looking leaves them due again when the lease ends)."""
        try:
            due = await self._redis.eval(_CLAIM, 1, self._pending, now_ms, limit, now_ms + lease_ms)
        except RedisError as exc:
            log.warning("response_memory_unavailable", error=type(exc).__name__)
            return []
        claimed: list[tuple[str, str]] = []
        for member in due:
            tenant, response_id = orjson.loads(member)
            claimed.append((str(tenant), str(response_id)))
        return claimed

    async def look_again(self, tenant: str, response_id: str, at_ms: int) -> None:
        try:
            await self._redis.zadd(self._pending, {_member(tenant, response_id): at_ms}, xx=True)
        except RedisError as exc:
            log.warning("response_memory_unavailable", error=type(exc).__name__)

    async def settled(self, tenant: str, response_id: str) -> None:
        try:
            await self._redis.zrem(self._pending, _member(tenant, response_id))
        except RedisError as exc:
            log.warning("response_memory_unavailable", error=type(exc).__name__)


def _member(tenant: str, response_id: str) -> bytes:
    return orjson.dumps([tenant, response_id])


def pending_of(record: RequestRecord) -> Pending:
    assert record.tenant is not None
    return Pending(
        request_id=record.request_id,
        key_id=record.tenant.key_id,
        requested_model=record.requested_model or record.called_model or "",
        action=record.action,
        started_at=record.started_at,
        prompt_tokens=record.prompt_tokens,
        forwarded_tokens=record.forwarded_tokens,
        bill_tenant=record.bill_tenant,
        stream=record.stream,
        client_request_id=record.client_request_id,
        counterfactual=(record.counterfactual.tokens, record.counterfactual.basis.value)
        if record.transformed and record.counterfactual is not None
        else None,
        tags=record.tags,
    )


Remember = Callable[[str, Mapping[str, Any] | None], Awaitable[None]]
"""Told a response's id and the response object as last seen (the whole answer, a stream's final or
last event), once its usage is known or the stream ended without it."""


def remembering(memory: ResponseMemory, record: RequestRecord, *, keep: bool, background: bool) -> Remember:
    """What remembers the response of ``record`` by its id: its size and provider, for a next turn
    (nothing when the upstream does not store it: ``store: false``); for a background response still
    running, what its cost event will need, and ``record.pending_response`` (its cost is recorded when it
    ends, by ``gateway.fronts.responses.pending``; if Redis cannot keep that, the request's estimate is)."""

    async def remember(response_id: str, response: Mapping[str, Any] | None) -> None:
        if record.tenant is None or record.called_model is None:
            return
        status = response.get("status") if isinstance(response, Mapping) else None
        running = background and status in RUNNING
        if not running and (not keep or status in RUNNING):
            return
        usage = record.usage
        value = Remembered(
            provider=record.provider or "",
            model=record.called_model,
            input_tokens=usage.input_tokens if usage else (record.forwarded_tokens or 0),
            output_tokens=usage.output_tokens if usage else 0,
            pending=pending_of(record) if running else None,
        )
        first_look = int(time.time() * 1000) + FIRST_LOOK_MS
        written = await memory.remember(record.tenant.name, response_id, value, look_at_ms=first_look)
        if running and written:
            record.pending_response = response_id

    return remember
