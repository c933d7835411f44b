"""The heatmap's colour scale: each row against the model's own range, not against a fixed threshold.

A row is shaded from its best trusted bucket (green) to its worst (red), on a log scale for levels (a
latency that doubles moves as far at 1 s as at 10 s). A rate (errors, ``length`` finishes, probe misses)
starts from none, its natural best, on a linear scale: 0% recall in every bucket is red, not "as good as
the best bucket". A fixed yardstick ("red
at ``factor`` times the best bucket") painted almost every cell red, since most signals grow with context
well past any factor; a relative one shows where along its own range each bucket sits. So that noise is
not painted as a cliff, the whole row is toned down by how far its worst is from its best in the
boundary's terms (``severity``): a row that varies by a few percent stays green. Buckets with too few
samples do not count towards the range (the caller leaves them out and greys them).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from gateway.config.schema.sampling import BoundaryConfig

Kind = Literal["level", "rate"]


def severity(bad: float, best: float, kind: Kind, config: BoundaryConfig) -> float:
    """0 for as good as the row's best bucket, 1 for ``factor`` times worse (the boundary's yardstick)."""
    if kind == "rate":
        floor = config.rate_floor
        ratio = (bad + floor) / (best + floor) if best + floor > 0 else 1.0
        rose = (bad - best) / config.min_rate_increase if config.min_rate_increase > 0 else 1.0
        shade = min(1.0, (ratio - 1) / (config.factor - 1)) * min(1.0, rose)
    elif best > 0:
        shade = (bad / best - 1) / (config.factor - 1)
    else:
        shade = 0.0 if bad <= best else 1.0
    return min(1.0, max(0.0, shade))


@dataclass(frozen=True, slots=True)
class Scale:
    """One row's range, as badness (grows as things get worse): its best (a rate's: none) and worst finite
    values, and how strongly the row is shaded at its worst (0: it barely varies, 1: the boundary's factor
    or more)."""

    best: float
    worst: float
    strength: float
    kind: Kind

    @classmethod
    def of(cls, badness: Sequence[float], kind: Kind, config: BoundaryConfig) -> Scale:
        finite = [value for value in badness if math.isfinite(value)]
        if not finite:
            return cls(0.0, 0.0, 0.0, kind)
        best, worst = (0.0 if kind == "rate" else min(finite)), max(finite)
        strength = severity(max(badness), best, kind, config)
        return cls(best, worst, strength, kind)

    def shade(self, bad: float) -> float:
        """0 (green) to 1 (red): where ``bad`` sits in the row's range, times the row's strength."""
        if not math.isfinite(bad):
            return self.strength
        if self.worst <= self.best:
            return 0.0
        bad = min(self.worst, max(self.best, bad))
        if self.kind == "level" and self.best > 0:
            position = math.log(bad / self.best) / math.log(self.worst / self.best)
        else:
            position = (bad - self.best) / (self.worst - self.best)
        return self.strength * position


def colour(shade: float) -> str:
    """Green (0) through yellow to red (1), light enough for dark text."""
    shade = min(1.0, max(0.0, shade))
    return f"hsl({120 * (1 - shade):.0f},70%,80%)"
