"""Tenant budgets, enforced across concurrent requests and replicas by reservations in Redis.

Before a request goes upstream, ``reserve()`` holds its maximum estimated cost in one atomic script:
``spend + open reservations + this ≤ limit`` or the request is refused (429 ``budget_exceeded``). The
hold lives in the tenant's ``holds`` hash until the cost event whose id is the request id is applied,
which removes the hold and adds the actual cost in the same script, so spend is never counted twice and
never missing in between. A request that ends without that event calls ``release()``. Holds lapse after
``reservation_ttl_seconds`` (a crashed replica cannot block a tenant for good).

When Redis does not answer within ``budget_timeout_seconds``, a budget that fails closed refuses the
request (503) and one that fails open lets it through unenforced. A refused or dropped connection also
leaves Redis alone for ``probe_interval_seconds``, so a dead server costs no request a wait; a slow answer
costs only the request that waited for it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass

import structlog
from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import MaxConnectionsError, RedisError

from gateway.base.errors import BudgetExceeded, ServiceUnavailable
from gateway.base.money import usd
from gateway.config.schema.ledger import BudgetConfig, BudgetPeriod, LedgerConfig
from gateway.ledger.keys import LedgerKeys
from gateway.ledger.period import day_of, month_of
from gateway.ledger.reply import integer, text
from gateway.ledger.script import RELEASE, RESERVE, Script

PERIODS: tuple[BudgetPeriod, ...] = ("daily", "monthly")
MAX_CONCURRENT_CHECKS = 32
"""Budget checks in flight per process: a burst queues here instead of exhausting the connection pool
(the wait for a place counts in ``budget_timeout_seconds``)."""

BudgetLookup = Callable[[str], BudgetConfig | None]
"""The current budget of a tenant by name (read from the live config, so hot reloads apply)."""


def no_key_budgets(key_id: str) -> BudgetConfig | None:
    return None


@dataclass(frozen=True, slots=True)
class Reservation:
    tenant: str
    request_id: str
    amount_nanos: int
    warning: str | None = None
    """Set when spend plus open reservations reached a soft line (or a limit that only warns)."""
    enforced: bool = True
    """False when Redis could not be asked and the budget fails open: nothing is held."""


@dataclass(frozen=True, slots=True)
class KeyBudget:
    """A budget of one API key (a managed key's), held in the same atomic step as its tenant's."""

    key_id: str
    budget: BudgetConfig


@dataclass(frozen=True, slots=True)
class _Spend:
    daily: int
    monthly: int
    held: int

    def committed(self, period: BudgetPeriod, amount: int) -> int:
        return (self.daily if period == "daily" else self.monthly) + self.held + amount


class Budgets:
    def __init__(
        self,
        redis: Redis,
        *,
        budget_of: BudgetLookup,
        config: LedgerConfig | None = None,
        keys: LedgerKeys | None = None,
        clock: Callable[[], float] = time.time,
        key_budget_of: BudgetLookup = no_key_budgets,
    ) -> None:
        self.config = config or LedgerConfig()
        self.keys = keys or LedgerKeys(self.config.key_prefix)
        self.budget_of = budget_of
        self.key_budget_of = key_budget_of
        """The budget of an API key by its id (a managed key's; None for most)."""
        self._redis = redis
        self._clock = clock
        self._reserve = Script(RESERVE)
        self._release = Script(RELEASE)
        self._skip_redis_until = 0.0
        self._in_flight = asyncio.Semaphore(MAX_CONCURRENT_CHECKS)
        self._log = structlog.get_logger("gateway.ledger")

    async def reserve(
        self, tenant: str, request_id: str, max_cost_nanos: int, key: KeyBudget | None = None
    ) -> Reservation | None:
        """Hold ``max_cost_nanos`` for the request against its tenant's budget and its ``key``'s, in one
        step; ``None`` when neither has a budget.

        Raises ``BudgetExceeded`` when the request could cross a hard limit, and ``ServiceUnavailable``
        when Redis cannot be asked and the budget fails closed.
        """
        budget = self.budget_of(tenant)
        if budget is None and key is None:
            return None
        now_ms = int(self._clock() * 1000)
        keys, month = self.keys, month_of(now_ms)
        args: list[str | int] = [
            request_id,
            max_cost_nanos,
            self.config.reservation_ttl_seconds * 1000,
            *_hard_limits(budget),
        ]
        if key is not None:
            args += (key.key_id, *_hard_limits(key.budget))
        try:
            reply = await self._call(
                self._reserve,
                [
                    keys.holds(tenant),
                    keys.hold_expiry(tenant),
                    keys.daily(tenant, day_of(now_ms)),
                    keys.monthly(tenant, month),
                ],
                args,
            )
        except (RedisError, OSError, TimeoutError) as exc:
            return self._unchecked(_failing(budget, key), tenant, request_id, max_cost_nanos, exc)
        accepted, refused = integer(reply[0]), text(reply[1])
        spend = _Spend(integer(reply[2]), integer(reply[3]), integer(reply[4]))
        key_spend = _Spend(integer(reply[5]), integer(reply[6]), integer(reply[7]))
        if not accepted:
            if refused.startswith("key ") and key is not None:
                raise _exceeded(key.budget, refused.removeprefix("key "), key_spend, max_cost_nanos, "key's ")
            assert budget is not None
            raise _exceeded(budget, refused, spend, max_cost_nanos, "")
        warnings = [
            _warning(budget, spend, max_cost_nanos) if budget is not None else None,
            _warning(key.budget, key_spend, max_cost_nanos, whose="key's ") if key is not None else None,
        ]
        warning = "; ".join(each for each in warnings if each) or None
        return Reservation(tenant, request_id, max_cost_nanos, warning)

    async def release(self, reservation: Reservation | None) -> None:
        """Give back a hold whose request ended without its cost event (failed before any upstream cost).

        Never raises: if Redis cannot be reached the hold simply lapses after its TTL.
        """
        if reservation is None or not reservation.enforced:
            return
        keys = self.keys
        try:
            await self._call(
                self._release,
                [keys.holds(reservation.tenant), keys.hold_expiry(reservation.tenant)],
                [reservation.request_id],
            )
        except (RedisError, OSError, TimeoutError) as exc:
            self._log.warning(
                "budget_release_failed",
                tenant=reservation.tenant,
                request_id=reservation.request_id,
                error=str(exc),
            )

    async def _call(self, script: Script, keys: list[str], args: list[str | int]) -> list[object]:
        loop = asyncio.get_running_loop()
        if loop.time() < self._skip_redis_until:
            raise ConnectionError("Redis refused a connection moments ago")  # the builtin: an OSError
        try:
            async with asyncio.timeout(self.config.budget_timeout_seconds), self._in_flight:
                reply = await script.run(self._redis, keys, args)
        except (RedisConnectionError, OSError) as exc:
            if not isinstance(exc, MaxConnectionsError | TimeoutError):  # slow is not refused
                self._skip_redis_until = loop.time() + self.config.probe_interval_seconds
            raise
        return list(reply) if isinstance(reply, list) else [reply]

    def _unchecked(
        self, budget: BudgetConfig, tenant: str, request_id: str, amount: int, exc: BaseException
    ) -> Reservation:
        if not budget.fails_open():
            raise ServiceUnavailable(
                "the budget cannot be checked while the ledger store is unreachable; try again shortly",
                code="budget_unavailable",
            ) from exc
        return Reservation(
            tenant,
            request_id,
            amount,
            warning="budget not enforced: the ledger store is unreachable",
            enforced=False,
        )


def _hard_limits(budget: BudgetConfig | None) -> list[str | int]:
    """The script's limits of a budget: each period's, '' where it has none or only warns."""
    limits = [None if budget is None or not budget.hard else budget.limit_nanos(period) for period in PERIODS]
    return ["" if limit is None else limit for limit in limits]


def _failing(budget: BudgetConfig | None, key: KeyBudget | None) -> BudgetConfig:
    """The budget whose ``on_redis_down`` decides while Redis cannot be asked: one that fails closed, if
    either does."""
    chosen = [each for each in (budget, key.budget if key else None) if each is not None]
    return next((each for each in chosen if not each.fails_open()), chosen[0])


def _exceeded(budget: BudgetConfig, refused: str, spend: _Spend, hold: int, whose: str) -> BudgetExceeded:
    period: BudgetPeriod = "daily" if refused == "daily" else "monthly"
    spent = spend.committed(period, 0) - spend.held
    limit = budget.limit_nanos(period)
    refusal = BudgetExceeded(_refusal(whose + budget.describe(period), limit, spent, spend.held, hold))
    refusal.room_nanos = None if limit is None else limit - spent
    return refusal


def _refusal(budget: str, limit: int | None, spent: int, held: int, hold: int) -> str:
    """Why a hold was refused, with the figures. A budget spent is "spent"; otherwise it is the hold that
    did not fit (the most this request may cost, taken before it is sent), not anything spent by it. Holds
    below zero (data of an older version) count as none, as they do in the script."""
    held = max(held, 0)
    figures = f"${usd(spent, trim=True)} spent, ${usd(held, trim=True)} held by requests in flight"
    if limit is not None and spent >= limit:
        return f"The {budget} is spent ({figures})."
    left = max((limit or 0) - spent - held, 0)
    return (
        f"This request may cost up to ${usd(hold, trim=True)}, held before it is sent: that hold was "
        f"refused (nothing was spent on it), being more than the ${usd(left, trim=True)} left of the "
        f"{budget} ({figures}). Asking for fewer output tokens lowers it."
    )


def _warning(budget: BudgetConfig, spend: _Spend, amount: int, *, whose: str = "") -> str | None:
    notes = []
    for period in PERIODS:
        limit, soft = budget.limit_nanos(period), budget.soft_nanos(period)
        committed = spend.committed(period, amount)
        if limit is not None and not budget.hard and committed > limit:
            notes.append(f"{whose}{budget.describe(period)} exceeded: ${usd(committed, trim=True)} committed")
        elif limit is not None and soft is not None and committed >= soft:
            percent = committed * 100 // limit
            used = f"{percent}% used: ${usd(committed, trim=True)} committed"
            notes.append(f"{whose}{budget.describe(period)} {used}")
    return "; ".join(notes) or None
