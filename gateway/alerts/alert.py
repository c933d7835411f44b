"""One alert: what it says (a Slack-compatible ``text`` and the figures), and the claim that sends it once."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from gateway.ledger.period import MS_PER_DAY, day_of, to_ms

CLAIM_KEPT_DAYS = 2
"""A claim outlives its period by this much (an instance whose clock lags must still find it)."""


@dataclass(frozen=True, slots=True)
class Alert:
    kind: str
    """``budget``, ``forecast`` or ``policy_fit``."""
    tenant: str
    period: str
    """The period the alert belongs to: ``2026-12`` or ``2026-12-02``; once per period and name."""
    name: str
    """Which alert of the period: a threshold (``80``), ``forecast``, ``over_cliff``, ``warning_band``."""
    text: str
    claim_until_ms: int
    figures: dict[str, Any] = field(default_factory=dict)

    def payload(self) -> dict[str, Any]:
        """The webhook's JSON: Slack reads ``text``; other receivers read ``alert``."""
        return {
            "text": self.text,
            "alert": {
                "kind": self.kind,
                "tenant": self.tenant,
                "period": self.period,
                "name": self.name,
                **self.figures,
            },
        }


def day_end_ms(time_ms: int) -> int:
    return (time_ms // MS_PER_DAY + 1) * MS_PER_DAY


def month_bounds_ms(time_ms: int) -> tuple[int, int]:
    """The start and end (exclusive) of the UTC month holding ``time_ms``."""
    first = date.fromisoformat(day_of(time_ms)).replace(day=1)
    following = (first + timedelta(days=32)).replace(day=1)
    return (
        to_ms(datetime.combine(first, time(), UTC)),
        to_ms(datetime.combine(following, time(), UTC)),
    )


def kept_until(period_end_ms: int) -> int:
    return period_end_ms + CLAIM_KEPT_DAYS * MS_PER_DAY
