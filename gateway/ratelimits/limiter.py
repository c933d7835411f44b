"""Rate limits, exact over every worker and instance: one Lua script per admission, and per settlement (a
batch of them: ``gateway.ratelimits.settler``).

Each limit of a request (``gateway.config.rate_limits.limits_for``: its tenant's, its key's, and theirs for
its model; requests, tokens and dollars per minute in each) is a counter in Redis under the tenant's hash
tag, ``gw:{tenant}:rate:<scope>:<r|t|d>``. The script admits the request against all of them at once, or
against none, so concurrent requests on any number of processes are admitted exactly up to the limits.

Why a token bucket (GCRA, ``gateway.ratelimits.script``) and not a fixed window: it is what OpenAI's and
Anthropic's own limits are (their headers give the time until a limit is whole again, which is what a
bucket has and a window does not), a minute's limit can never be spent twice over across a window's edge,
and a refused request learns the exact time until it fits: its ``Retry-After`` is that, usually well under
a second at a busy limit, so the SDKs' own retries succeed instead of waiting out a window.

A request holds 1 request, its input tokens as counted plus its output cap (its ``max_tokens`` /
``max_completion_tokens`` / ``max_output_tokens`` times its choices, else ``limits.held_output_tokens``),
and the most it can cost (the budget's hold, ``gateway.core.admission``); an embeddings call holds one token
per byte of its body and no output. Once its usage is known (``RateSettler``) the tokens and dollars it did
not use are given back, and what it used beyond the hold is taken; a request refused before it reached a
model gives back all of its tokens and dollars (its request still counts).

A timed-out admission whose script ran anyway leaves its take in the counters while the request is refused
(503, or let through unlimited): never more admitted than the limits, at worst fewer.

When Redis does not answer within the ledger's ``budget_timeout_seconds``, the tenant's choice applies as
for its budget: refuse (503, the default) or let the request through unlimited, with a warning. A refused
connection leaves Redis alone for ``probe_interval_seconds``, as the budget does.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import structlog
from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import MaxConnectionsError, RedisError

from gateway.base.errors import RateLimited, ServiceUnavailable
from gateway.base.headroom import Allowance, Headroom
from gateway.base.money import usd
from gateway.base.record import Note
from gateway.config.rate_limits import Applicable
from gateway.config.schema.ledger import LedgerConfig
from gateway.ledger.reply import integer
from gateway.ledger.script import Script
from gateway.ratelimits.script import ADMIT, SETTLE

PERIOD_MICROS = 60_000_000
MAX_CONCURRENT_CHECKS = 32
"""Admissions in flight per process: a burst queues here instead of exhausting the connection pool."""

DIMENSIONS = (("requests", "r"), ("tokens", "t"), ("nanos", "d"))
UNITS = {"requests": "requests", "tokens": "tokens", "nanos": "dollars"}

log = structlog.get_logger("gateway.ratelimits")


@dataclass(frozen=True, slots=True)
class Counter:
    key: str
    scope: str
    dimension: str
    """``requests``, ``tokens`` or ``nanos``."""
    capacity: int


@dataclass(frozen=True, slots=True)
class Demand:
    """What one request holds: its input tokens as counted plus its output cap, and its most cost."""

    tokens: int
    nanos: int

    def of(self, dimension: str) -> int:
        return 1 if dimension == "requests" else self.tokens if dimension == "tokens" else self.nanos


@dataclass(frozen=True, slots=True)
class RateHold:
    """An admitted request's estimates, to settle once its usage is known."""

    tenant: str
    counters: tuple[Counter, ...]
    """The token and dollar counters (a request is a request: nothing to settle)."""
    demand: Demand
    headroom: Headroom | None
    enforced: bool = True

    def returns(self, *, tokens: int, nanos: int) -> list[Return]:
        """What to give back to each counter once the request used ``tokens`` and ``nanos``."""
        if not self.enforced:
            return []
        used = Demand(tokens, nanos)
        return [
            Return(counter.key, counter.capacity, back)
            for counter in self.counters
            if (back := self.demand.of(counter.dimension) - used.of(counter.dimension))
        ]


@dataclass(frozen=True, slots=True)
class Return:
    """An amount to give back to a counter (below zero: to take from it, used beyond the hold)."""

    key: str
    capacity: int
    amount: int


class RateLimiter:
    def __init__(
        self,
        redis: Redis,
        *,
        prefix: str = "gw",
        config: Callable[[], LedgerConfig] = LedgerConfig,
        clock: Callable[[], float] | None = None,
    ) -> None:
        """``clock``: Unix seconds to count by instead of the server's (tests)."""
        self._redis = redis
        self._prefix = prefix
        self._config = config
        self._clock = clock
        self._admit = Script(ADMIT)
        self._settle = Script(SETTLE)
        self._skip_redis_until = 0.0
        self._in_flight = asyncio.Semaphore(MAX_CONCURRENT_CHECKS)

    def counters(self, applicable: Applicable) -> tuple[Counter, ...]:
        base = f"{self._prefix}:{{{applicable.tenant}}}:rate"
        return tuple(
            Counter(f"{base}:{scope}:{code}", scope, dimension, capacity)
            for scope, limits in applicable.sets
            for dimension, code in DIMENSIONS
            if (capacity := getattr(limits, dimension)) is not None
        )

    async def admit(self, applicable: Applicable, demand: Demand) -> RateHold:
        """Take ``demand`` from every limit of ``applicable``, or from none: raises ``RateLimited`` (429)
        when one of them has not enough left, ``ServiceUnavailable`` (503) when Redis cannot be asked
        and the tenant's limits fail closed."""
        counters = self.counters(applicable)
        args: list[str | int] = [self._now(), PERIOD_MICROS]
        for counter in counters:
            args += [counter.capacity, demand.of(counter.dimension)]
        try:
            reply = await self._call(self._admit, [counter.key for counter in counters], args)
        except (RedisError, OSError, TimeoutError) as exc:
            if not applicable.fails_open:
                raise ServiceUnavailable(
                    "rate limits cannot be checked while Redis is unreachable; try again shortly",
                    code="rate_limits_unavailable",
                ) from exc
            log.warning("rate_limits_unchecked", tenant=applicable.tenant, error=type(exc).__name__)
            # no figures to show, and the provider's are not the caller's: no rate-limit headers at all
            return RateHold(
                applicable.tenant, (), demand, Headroom(None, None, at=time.time()), enforced=False
            )
        admitted, refused, wait = (integer(value) for value in reply[:3])
        states = [integer(value) for value in reply[3:]]
        headroom = _headroom(counters, states[0::2], states[1::2])
        if not admitted:
            raise _refusal(counters[refused - 1], demand, wait, headroom)
        settled = tuple(counter for counter in counters if counter.dimension != "requests")
        return RateHold(applicable.tenant, settled, demand, headroom)

    async def settle(self, hold: RateHold, *, tokens: int, nanos: int) -> None:
        """Give back what the request held and did not use (``tokens``, ``nanos``: what it used)."""
        await self.give_back(hold.returns(tokens=tokens, nanos=nanos))

    async def give_back(self, returns: Sequence[Return]) -> None:
        """Apply ``returns``, on counters of one tenant, in one script. Never raises: if Redis cannot be
        asked, what was held stays taken until the counters refill."""
        if not returns:
            return
        args: list[str | int] = [self._now(), PERIOD_MICROS]
        for back in returns:
            args += [back.capacity, back.amount]
        try:
            await self._call(self._settle, [back.key for back in returns], args)
        except (RedisError, OSError, TimeoutError) as exc:
            log.warning("rate_limits_settle_failed", error=type(exc).__name__)

    def _now(self) -> str | int:
        return "" if self._clock is None else int(self._clock() * 1_000_000)

    async def _call(self, script: Script, keys: list[str], args: list[str | int]) -> list[object]:
        loop = asyncio.get_running_loop()
        if loop.time() < self._skip_redis_until:
            raise ConnectionError("Redis refused a connection moments ago")  # the builtin: an OSError
        config = self._config()
        try:
            async with asyncio.timeout(config.budget_timeout_seconds), self._in_flight:
                reply = await script.run(self._redis, keys, args)
        except (RedisConnectionError, OSError) as exc:
            if not isinstance(exc, MaxConnectionsError | TimeoutError):  # slow is not refused
                self._skip_redis_until = loop.time() + config.probe_interval_seconds
            raise
        return list(reply) if isinstance(reply, list) else [reply]


def _headroom(counters: tuple[Counter, ...], left: list[int], whole_in: list[int]) -> Headroom:
    """Per dimension, the limit with the least left (the smaller limit of two with as little);
    ``whole_in``: microseconds until each counter is whole again."""
    tightest: dict[str, Allowance] = {}
    for counter, remaining, micros in zip(counters, left, whole_in, strict=True):
        allowance = Allowance(counter.capacity, remaining, micros / 1_000_000)
        found = tightest.get(counter.dimension)
        if found is None or (allowance.remaining, allowance.limit) < (found.remaining, found.limit):
            tightest[counter.dimension] = allowance
    return Headroom(tightest.get("requests"), tightest.get("tokens"), at=time.time())


def _refusal(counter: Counter, demand: Demand, wait: int, headroom: Headroom) -> RateLimited:
    unit = UNITS[counter.dimension]
    needed = demand.of(counter.dimension)
    scope = _scope_text(counter.scope)

    def amount(value: int) -> str:
        return f"${usd(value, trim=True)}" if counter.dimension == "nanos" else f"{value} {unit}"

    if wait < 0:
        error = RateLimited(
            f"This request needs {amount(needed)}, more than the {amount(counter.capacity)} a minute "
            f"allowed {scope}: it can never be admitted. Ask for fewer output tokens or send less.",
            retry_after=int(PERIOD_MICROS / 1_000_000),
            retry=False,
        )
    else:
        seconds = wait / 1_000_000
        error = RateLimited(
            f"Rate limit reached for {unit} per minute {scope}: limit {amount(counter.capacity)}, this "
            f"request needs {amount(needed)}. Please try again in {seconds:.3f}s.",
            retry_after=max(1, math.ceil(seconds)),
            retry_after_ms=max(1, math.ceil(wait / 1000)),
        )
    error.error_type = "requests" if counter.dimension == "requests" else "tokens"
    error.headroom = headroom
    return error


def _scope_text(scope: str) -> str:
    """``tenant`` → "for the tenant", ``key:<id>:model:<m>`` → "for model <m> on key <id>", ..."""
    parts = scope.split(":", 3)
    if parts[0] == "tenant":
        return "for the tenant"
    if parts[0] == "model":
        return f"for model {scope.removeprefix('model:')} on the tenant"
    if len(parts) > 2:
        return f"for model {parts[3]} on key {parts[1]}"
    return f"on key {parts[1]}"


RATE_HOLD: Note[RateHold] = Note("rate_hold")
"""An admitted request's hold on its rate limits, settled by ``gateway.ratelimits.settler``."""
