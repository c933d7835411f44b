"""The period an analysis reads: ``--since`` (a duration back from now, or a date), or ``--from``/``--to``."""

from __future__ import annotations

from gateway.ledger.period import Period
from gateway.sampling.since import parse_since

DEFAULT_SINCE = "7d"


def window(since: str | None, start: str | None, end: str | None, *, now_ms: int) -> Period:
    """Raises ``ValueError`` with a readable message; ``from`` wins over ``since``."""
    if start is not None:
        return Period.parse(start, end, now_ms=now_ms)
    end_ms = Period.parse(None, end, now_ms=now_ms).end_ms
    start_ms = int(parse_since(since or DEFAULT_SINCE, now=now_ms / 1000) * 1000)
    return Period(start_ms, end_ms)
