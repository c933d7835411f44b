"""The ledger's and the budgets' sections of the YAML config (pydantic, at the edge)."""

from __future__ import annotations

from decimal import Decimal
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from gateway.base.money import nanos_from_usd, usd
from gateway.config.schema.alerts import ascending_percents


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class LedgerConfig(_Strict):
    """``ledger:`` in the config file. Every field has a sensible default."""

    retention_months: int = Field(default=13, ge=1, le=120, description="months kept after a month ends")
    queue_size: int = Field(default=100_000, ge=1, description="events held in memory before spooling")
    batch_size: int = Field(default=500, ge=1, le=10_000, description="events per pipelined write")
    linger_seconds: float = Field(
        default=1.0,
        ge=0,
        le=1,
        description="the writer writes at most once in this many seconds: an event that finds the last "
        "write longer ago is written at once, one that comes sooner waits for the rest of the period with "
        "those queued after it, so that under load one Redis round trip carries many; an event reaches "
        "Redis at most this much later (a budget is held on the request path meanwhile)",
    )
    write_timeout_seconds: float = Field(default=5.0, gt=0, description="a slower batch counts as Redis down")
    probe_interval_seconds: float = Field(default=1.0, gt=0, description="retry period while Redis is down")
    replica_confirm_seconds: float = Field(
        default=30.0,
        ge=0,
        description="on a Redis Cluster, how long a batch no replica confirmed is written again before it "
        "counts as written without one",
    )
    reservation_ttl_seconds: int = Field(
        default=900, ge=1, description="an unsettled budget reservation lapses after this (crash safety)"
    )
    budget_timeout_seconds: float = Field(
        default=5.0, gt=0, description="longest wait for a budget check before Redis counts as down"
    )
    key_prefix: str = Field(default="gw", min_length=1, pattern=r"^[^{}]+$")
    archive: str | None = Field(
        default=None,
        pattern=r"^postgres(ql)?://",
        description="a postgresql:// URL: the gateway drains the cost events into this PostgreSQL archive, "
        "and every reader of the ledger reads from it",
    )
    redis_keep_days: int = Field(
        default=35,
        ge=1,
        le=3660,
        description="with an archive: days of cost events Redis keeps (older ones are trimmed from Redis "
        "once the archive has them)",
    )
    archive_batch_size: int = Field(
        default=5_000, ge=1, le=100_000, description="with an archive: events per archive transaction"
    )
    archive_poll_seconds: float = Field(
        default=1.0, gt=0, le=60, description="with an archive: how often the drainer looks for new events"
    )


    @field_validator("archive", mode="before")
    @classmethod
    def _empty_is_none(cls, value: object) -> object:
        """``archive: ${LEDGER_ARCHIVE_URL:-}`` with the variable unset or empty: no archive."""
        return None if value == "" else value


BudgetPeriod = Literal["daily", "monthly"]


class BudgetConfig(_Strict):
    """``tenants.<name>.budget``: spending limits in USD per UTC day and/or month.

    ``soft_ratio`` (of each limit) or ``soft_usd`` (of the monthly limit, else the daily one) sets the line
    where a warning starts. With ``hard`` (the default) a request that could cross a limit is refused;
    without it, limits only warn. ``on_redis_down`` says whether requests pass while spend cannot be read.
    """

    monthly_usd: Decimal | None = Field(default=None, gt=0, decimal_places=9)
    daily_usd: Decimal | None = Field(default=None, gt=0, decimal_places=9)
    soft_ratio: Decimal | None = Field(default=None, gt=0, lt=1)
    soft_usd: Decimal | None = Field(default=None, gt=0, decimal_places=9)
    hard: bool = True
    on_redis_down: Literal["closed", "open"] = "closed"
    alert_thresholds: tuple[int, ...] | None = Field(
        default=None,
        description="percents of each limit that alert (alerts: webhook_url set); unset: alerts.thresholds, "
        "empty: none for this tenant",
    )

    @field_validator("alert_thresholds")
    @classmethod
    def _thresholds(cls, values: tuple[int, ...] | None) -> tuple[int, ...] | None:
        return None if values is None else ascending_percents(values)

    @model_validator(mode="after")
    def _consistent(self) -> BudgetConfig:
        if self.monthly_usd is None and self.daily_usd is None:
            raise ValueError("a budget needs monthly_usd or daily_usd")
        if self.soft_ratio is not None and self.soft_usd is not None:
            raise ValueError("give soft_ratio or soft_usd, not both")
        if self.soft_usd is not None and self.soft_usd >= (self.monthly_usd or self.daily_usd or 0):
            raise ValueError("soft_usd must be below the limit it warns about")
        return self

    def limit_nanos(self, period: BudgetPeriod) -> int | None:
        amount = self.monthly_usd if period == "monthly" else self.daily_usd
        return None if amount is None else nanos_from_usd(amount)

    def soft_nanos(self, period: BudgetPeriod) -> int | None:
        limit = self.limit_nanos(period)
        if limit is None:
            return None
        if self.soft_ratio is not None:
            return int(limit * self.soft_ratio)
        soft_period: BudgetPeriod = "monthly" if self.monthly_usd is not None else "daily"
        if self.soft_usd is not None and period == soft_period:
            return nanos_from_usd(self.soft_usd)
        return None

    def fails_open(self) -> bool:
        return not self.hard or self.on_redis_down == "open"

    def describe(self, period: BudgetPeriod) -> str:
        limit = self.limit_nanos(period)
        return f"{period} budget of ${usd(limit or 0, trim=True)}"
