"""Percentiles by linear interpolation between closest ranks (numpy's default, Hyndman-Fan type 7).

For sorted values x[0..n-1], the q-th percentile sits at rank h = (n - 1) * q / 100 and is
x[floor(h)] + (h - floor(h)) * (x[floor(h) + 1] - x[floor(h)]). One value is its own every percentile.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass


def percentile(ordered: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) of ``ordered``, which must be sorted and not empty."""
    if not ordered:
        raise ValueError("percentile of no values")
    if not 0 <= q <= 100:
        raise ValueError("q must be within 0 and 100")
    rank = (len(ordered) - 1) * q / 100
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    fraction = rank - low
    return ordered[low] + fraction * (ordered[high] - ordered[low])


@dataclass(frozen=True, slots=True)
class Spread:
    """p10, p50 and p90 of a signal, and how many values they come from."""

    count: int
    p10: float
    p50: float
    p90: float

    def as_dict(self, digits: int = 4) -> dict[str, float | int]:
        return {
            "count": self.count,
            "p10": round(self.p10, digits),
            "p50": round(self.p50, digits),
            "p90": round(self.p90, digits),
        }


def spread(values: Iterable[float | None]) -> Spread | None:
    """The spread of the values that are not None, or None when there are none."""
    ordered = sorted(value for value in values if value is not None)
    if not ordered:
        return None
    return Spread(
        count=len(ordered),
        p10=percentile(ordered, 10),
        p50=percentile(ordered, 50),
        p90=percentile(ordered, 90),
    )
