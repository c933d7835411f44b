"""Percentiles in constant memory: counts in bins 2% wide (log scale), deterministic, exact to within 2%.

A month of events does not fit a list per cell; a bin per 2% of range does (a few hundred bins from a
millisecond to an hour), and a percentile read from it is off by at most a bin's width.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

RATIO = 1.02
_LOG = math.log(RATIO)


@dataclass(slots=True)
class LogHistogram:
    counts: dict[int, int] = field(default_factory=dict)
    total: int = 0

    def add(self, value: int | None) -> None:
        if value is None:
            return
        key = 0 if value <= 0 else int(math.log(value) / _LOG) + 1
        self.counts[key] = self.counts.get(key, 0) + 1
        self.total += 1

    def percentile(self, q: float) -> float | None:
        """The nearest-rank ``q``-th percentile (0-100), as its bin's geometric middle; None when empty."""
        if not self.total:
            return None
        rank = max(1, math.ceil(q / 100 * self.total))
        seen = 0
        for key in sorted(self.counts):
            seen += self.counts[key]
            if seen >= rank:
                return 0.0 if key == 0 else RATIO ** (key - 0.5)
        raise AssertionError("unreachable: the ranks add up to the total")

    def spread(self) -> dict[str, float | int] | None:
        if not self.total:
            return None
        values = {name: self.percentile(q) for name, q in (("p10", 10), ("p50", 50), ("p90", 90))}
        return {"count": self.total, **{name: round(value or 0.0) for name, value in values.items()}}
