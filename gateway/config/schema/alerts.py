"""``alerts:`` in the config file: budget alerts and policy-fit alerts, delivered to a webhook.

Off unless ``webhook_url`` is set. A tenant's budget may set its own ladder (``budget.alert_thresholds``).
"""

from __future__ import annotations

from decimal import Decimal

from pydantic import Field, field_validator

from gateway.config.schema.base import Strict

DEFAULT_THRESHOLDS = (50, 80, 100)
"""Percent of a daily or monthly budget at which an alert goes."""

Percent = int


def ascending_percents(values: tuple[int, ...]) -> tuple[int, ...]:
    if list(values) != sorted(set(values)):
        raise ValueError("alert thresholds are distinct percents in ascending order")
    if any(value < 1 or value > 1000 for value in values):
        raise ValueError("an alert threshold is a percent of the budget, 1 to 1000")
    return values


class PolicyFitConfig(Strict):
    """The ops alert: a tenant's recent requests keep landing past a cliff or in the warning band."""

    enabled: bool = True
    window_minutes: int = Field(default=60, ge=5, le=1440, description="the recent requests looked at")
    min_requests: int = Field(default=20, ge=1, description="fewer requests in the window say nothing")
    over_cliff_share: Decimal = Field(
        default=Decimal("0.05"),
        gt=0,
        le=1,
        description="share billed past a cliff (a price tier) that alerts",
    )
    warning_share: Decimal = Field(
        default=Decimal("0.5"),
        gt=0,
        le=1,
        description="share the policy had to act on (the warning band or beyond: compressed, retrieved, "
        "rerouted, or forwarded in the band for the cache) that alerts",
    )
    interval_seconds: float = Field(default=300.0, ge=5, description="how often the window is read")


class AlertsConfig(Strict):
    webhook_url: str | None = Field(
        default=None, description="where alerts are POSTed (JSON with a Slack-compatible text); unset: off"
    )
    headers: dict[str, str] = Field(default_factory=dict, description="extra headers sent with each alert")
    thresholds: tuple[Percent, ...] = Field(
        default=DEFAULT_THRESHOLDS, description="percents of each daily and monthly budget that alert"
    )
    forecast: bool = Field(default=True, description="alert when the month-end forecast crosses the budget")
    forecast_after_hours: float = Field(
        default=72.0, ge=1, description="no forecast before this much of the month has passed"
    )
    check_interval_seconds: float = Field(default=5.0, ge=0.1, description="how often spend is read")
    timeout_seconds: float = Field(default=5.0, gt=0, description="one delivery attempt's limit")
    attempts: int = Field(default=5, ge=1, le=20, description="delivery attempts per alert, first included")
    backoff_initial_seconds: float = Field(default=1.0, ge=0, description="wait before the first retry")
    backoff_max_seconds: float = Field(default=60.0, ge=0, description="cap of the doubling wait")
    queue_size: int = Field(default=1000, ge=1, description="alerts waiting for delivery; more are dropped")
    policy_fit: PolicyFitConfig = PolicyFitConfig()

    @field_validator("webhook_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError("webhook_url must start with http:// or https://")
        return value

    @field_validator("thresholds")
    @classmethod
    def _thresholds(cls, values: tuple[int, ...]) -> tuple[int, ...]:
        return ascending_percents(values)

    @property
    def enabled(self) -> bool:
        return bool(self.webhook_url)
