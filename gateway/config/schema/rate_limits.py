"""``rate_limits:`` on a tenant or on one of its keys: requests, tokens and dollars per minute, overall and
per model (``gateway.ratelimits`` enforces them)."""

from __future__ import annotations

from decimal import Decimal
from typing import Literal

from pydantic import Field, model_validator

from gateway.base.money import nanos_from_usd
from gateway.config.schema.base import Strict


class _PerMinute(Strict):
    requests_per_minute: int | None = Field(default=None, ge=1, description="requests admitted a minute")
    tokens_per_minute: int | None = Field(
        default=None,
        ge=1,
        description="input plus output tokens a minute: the input as counted and the output cap are held "
        "when a request is admitted, then settled to its usage",
    )
    usd_per_minute: Decimal | None = Field(
        default=None,
        gt=0,
        decimal_places=9,
        description="dollars a minute: the most the request can cost (the budget's hold) is held when it "
        "is admitted, then settled to its cost",
    )

    def limits_something(self) -> bool:
        limits = (self.requests_per_minute, self.tokens_per_minute, self.usd_per_minute)
        return any(limit is not None for limit in limits)

    def nanos_per_minute(self) -> int | None:
        return None if self.usd_per_minute is None else nanos_from_usd(self.usd_per_minute)


class PerMinute(_PerMinute):
    """Limits per rolling minute; a field left unset does not limit."""

    @model_validator(mode="after")
    def _something(self) -> PerMinute:
        if not self.limits_something():
            raise ValueError("give requests_per_minute, tokens_per_minute or usd_per_minute")
        return self


class RateLimitsConfig(_PerMinute):
    """``rate_limits:`` of a tenant or a key: limits on everything it sends, and per model (by the name
    the request asks for), each counted on its own."""

    models: dict[str, PerMinute] = Field(
        default_factory=dict, description="limits per model, by the model name a request asks for"
    )
    on_redis_down: Literal["closed", "open"] | None = Field(
        default=None,
        description="while Redis cannot be asked: closed refuses (503), open lets requests through "
        "unlimited; unset: as the tenant's budget says, else closed",
    )

    @model_validator(mode="after")
    def _something(self) -> RateLimitsConfig:
        if not self.limits_something() and not self.models:
            raise ValueError("give requests_per_minute, tokens_per_minute, usd_per_minute or models")
        return self

    def own(self) -> PerMinute | None:
        """The limits on everything, whatever the model; None when only models are limited."""
        if not self.limits_something():
            return None
        return PerMinute(
            requests_per_minute=self.requests_per_minute,
            tokens_per_minute=self.tokens_per_minute,
            usd_per_minute=self.usd_per_minute,
        )
