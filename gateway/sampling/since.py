"""The start of a report's window: a duration back from now (``30m``, ``24h``, ``7d``, ``2w``) or a UTC
date or ISO datetime (``2026-11-30``, ``2026-11-30T12:00:00Z``)."""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime

from gateway.base.echo import echoed

_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*([smhdw])")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 604_800}


def parse_since(text: str, *, now: float) -> float:
    """Epoch seconds; raises ``ValueError`` with a readable message."""
    value = text.strip().lower()
    duration = _DURATION.fullmatch(value)
    if duration:
        start = now - float(duration.group(1)) * _UNIT_SECONDS[duration.group(2)]
        if not math.isfinite(start):
            raise ValueError(f"{echoed(text, 32)!r} reaches further back than time goes")
        return start
    try:
        moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise ValueError(
            f"{echoed(text, 32)!r} is neither a duration (30m, 24h, 7d, 2w) nor an ISO date"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()
