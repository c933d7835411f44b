"""Which budget alerts a tenant's spend calls for: the ladder of thresholds per period, and the forecast.

Pure arithmetic on spend already read; the checker claims and sends what this returns. Spend is what the
ledger has counted (cost events applied), not what requests in flight hold.
"""

from __future__ import annotations

from dataclasses import dataclass

from gateway.alerts.alert import Alert, day_end_ms, kept_until, month_bounds_ms
from gateway.base.money import usd
from gateway.config.schema.ledger import BudgetConfig, BudgetPeriod
from gateway.ledger.period import day_of, month_of

HOUR_MS = 3_600_000


@dataclass(frozen=True, slots=True)
class Spend:
    today_nanos: int
    month_nanos: int


def ladder_alerts(
    tenant: str, budget: BudgetConfig, thresholds: tuple[int, ...], spend: Spend, *, now_ms: int
) -> list[Alert]:
    """One alert per threshold reached, per period with a limit, lowest first."""
    found: list[Alert] = []
    for period in ("daily", "monthly"):
        limit = budget.limit_nanos(period)
        if limit is None:
            continue
        spent = spend.today_nanos if period == "daily" else spend.month_nanos
        for percent in thresholds:
            if spent * 100 >= percent * limit:
                found.append(_threshold_alert(tenant, budget, period, percent, spent, limit, now_ms))
    return found


def _threshold_alert(
    tenant: str, budget: BudgetConfig, period: BudgetPeriod, percent: int, spent: int, limit: int, now_ms: int
) -> Alert:
    if period == "daily":
        name, ends = day_of(now_ms), day_end_ms(now_ms)
    else:
        name, ends = month_of(now_ms), month_bounds_ms(now_ms)[1]
    used = spent * 100 // limit
    mark = ":rotating_light:" if percent >= 100 else ":warning:"
    hard = " Requests that could cross it are refused." if budget.hard and percent >= 100 else ""
    text = (
        f"{mark} Tenant *{tenant}* has reached {percent}% of its {budget.describe(period)} for {name}: "
        f"${usd(spent, trim=True)} spent ({used}%).{hard}"
    )
    return Alert(
        kind="budget",
        tenant=tenant,
        period=name,
        name=str(percent),
        text=text,
        claim_until_ms=kept_until(ends),
        figures={
            "budget_period": period,
            "threshold_percent": percent,
            "spent_usd": usd(spent, trim=True),
            "limit_usd": usd(limit, trim=True),
            "used_percent": used,
        },
    )


def forecast_alert(
    tenant: str, budget: BudgetConfig, spend: Spend, *, now_ms: int, after_hours: float
) -> Alert | None:
    """When the month so far, continued at its own average rate, ends above the monthly limit; None
    before ``after_hours`` of the month have passed (too little to extrapolate), without a monthly limit,
    or once the limit is reached (the ladder says that)."""
    limit = budget.limit_nanos("monthly")
    start, end = month_bounds_ms(now_ms)
    elapsed = now_ms - start
    if limit is None or elapsed < after_hours * HOUR_MS or spend.month_nanos >= limit:
        return None
    forecast = spend.month_nanos * (end - start) // elapsed
    if forecast <= limit:
        return None
    month = month_of(now_ms)
    text = (
        f":chart_with_upwards_trend: Tenant *{tenant}* is on course to spend ${usd(forecast, trim=True)} "
        f"in {month}, over its {budget.describe('monthly')}: ${usd(spend.month_nanos, trim=True)} spent in "
        f"the first {elapsed / (end - start):.0%} of the month (a straight-line forecast)."
    )
    return Alert(
        kind="forecast",
        tenant=tenant,
        period=month,
        name="forecast",
        text=text,
        claim_until_ms=kept_until(end),
        figures={
            "budget_period": "monthly",
            "spent_usd": usd(spend.month_nanos, trim=True),
            "forecast_usd": usd(forecast, trim=True),
            "limit_usd": usd(limit, trim=True),
        },
    )
