"""The periods the dashboard offers, as the ``--from``/``--to`` that ``gateway costs summary`` would take
for them (``gateway.ledger.period.Period.parse``): the same words give the same span of time."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, timedelta
from typing import Literal, cast

from gateway.ledger.period import Period, day_of

PeriodName = Literal["today", "7d", "month", "last_month", "custom"]
PERIODS: dict[PeriodName, str] = {
    "today": "Today",
    "7d": "Last 7 days",
    "month": "This month",
    "last_month": "Last month",
    "custom": "Custom",
}


@dataclass(frozen=True, slots=True)
class Chosen:
    name: PeriodName
    start: str | None
    """The ``--from`` of ``gateway costs summary`` (None: this month's start)."""
    end: str | None
    """The ``--to`` (a date is inclusive; None: now)."""
    period: Period


def choose(name: str, start: str | None, end: str | None, *, now_ms: int) -> Chosen:
    """The period called ``name``; ``custom`` takes ``start`` and ``end`` (dates or ISO datetimes, UTC).
    Raises ``ValueError`` for an unknown name or a bad bound."""
    today = date.fromisoformat(day_of(now_ms))
    bounds: tuple[str | None, str | None]
    if name == "today":
        bounds = (today.isoformat(), None)
    elif name == "7d":
        bounds = ((today - timedelta(days=6)).isoformat(), None)
    elif name == "month":
        bounds = (today.replace(day=1).isoformat(), None)
    elif name == "last_month":
        last_day = today.replace(day=1) - timedelta(days=1)
        bounds = (last_day.replace(day=1).isoformat(), last_day.isoformat())
    elif name == "custom":
        if not start:
            raise ValueError("a custom period needs a start date")
        bounds = (start.strip(), end.strip() if end else None)
    else:
        raise ValueError(f"period must be one of {', '.join(PERIODS)}")
    try:
        period = Period.parse(bounds[0], bounds[1], now_ms=now_ms)
    except OverflowError as exc:
        raise ValueError("a date past 9999-12-31") from exc
    return Chosen(cast("PeriodName", name), bounds[0], bounds[1], period)
