"""The rows of the behaviour map's heatmap: for each signal percentile, how to read its value from a
bucket, the count behind it, how to show it, which way is worse, and what makes a cell trusted.

A cell is trusted when it has as many observations as the boundary compares (``min_count``; probe recall:
``min_probe_count``), the slowest decile too: a tenth of a bucket of 40 is 4 requests, too few to paint a
cell red. Untrusted cells are shown greyed, and neither coloured nor counted in a row's range. A tokens per
second above ``max_tokens_per_second`` is flagged as implausible (an answer delivered at once), and is
neither coloured nor counted either.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from gateway.config.schema.sampling import BoundaryConfig
from gateway.sampling.percentiles import Spread
from gateway.sampling.report.report import BucketStats
from gateway.sampling.report.shading import Kind

Value = Callable[[BucketStats], float | None]
Count = Callable[[BucketStats], int]
Needs = Literal["samples", "probes"]


@dataclass(frozen=True, slots=True)
class Column:
    group: str
    name: str
    value: Value
    count: Count
    """The observations behind the value, shown in the cell."""
    show: Callable[[float], str]
    badness: Callable[[float], float]
    """Maps a value to a number that grows as things get worse (as in
    ``gateway.sampling.report.boundary``)."""
    kind: Kind = "level"
    signal: str | None = None
    """The boundary signal this row shows, so a degraded cell can be outlined."""
    needs: Needs = "samples"
    """What makes a cell trusted: its own count reaches ``min_count`` (``samples``) or ``min_probe_count``
    (``probes``)."""
    shaded: bool = True
    """False for the gateway's own time (side calls): shown, not judged."""
    ceiling: Callable[[BoundaryConfig], float] | None = None
    """Above it a value is implausible for this row (tokens per second of an answer delivered at once)."""

    def trusted(self, stats: BucketStats, config: BoundaryConfig) -> bool:
        if self.needs == "probes":
            return self.count(stats) >= config.min_probe_count
        return stats.enough_samples and self.count(stats) >= config.min_count

    def implausible(self, value: float, config: BoundaryConfig) -> bool:
        return self.ceiling is not None and value > self.ceiling(config)


def _pick(spread: Callable[[BucketStats], Spread | None], which: str) -> Value:
    def value(stats: BucketStats) -> float | None:
        found = spread(stats)
        return float(getattr(found, which)) if found is not None else None

    return value


def _counted(spread: Callable[[BucketStats], Spread | None]) -> Count:
    def count(stats: BucketStats) -> int:
        found = spread(stats)
        return found.count if found is not None else 0

    return count


def _seconds(value: float) -> str:
    return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.2f} s"


def _share(value: float) -> str:
    return f"{value:.1%}"


def _plain(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def _same(value: float) -> float:
    return value


def _inverse(value: float) -> float:
    return 1 / value if value > 0 else math.inf


def _miss(recall: float) -> float:
    return 1 - recall


def _negative(value: float) -> float:
    return -value


def _spread_columns(
    group: str, spread: Callable[[BucketStats], Spread | None], show: Callable[[float], str],
    badness: Callable[[float], float], signal: str | None = None, *, shaded: bool = True,
    ceiling: Callable[[BoundaryConfig], float] | None = None,
) -> list[Column]:  # fmt: skip
    return [
        Column(
            group, which, _pick(spread, which), _counted(spread), show, badness, "level",
            signal if which == "p50" else None, shaded=shaded, ceiling=ceiling,
        )
        for which in ("p10", "p50", "p90")
    ]  # fmt: skip


def _speed_ceiling(config: BoundaryConfig) -> float:
    return config.max_tokens_per_second


def _worst(stats: BucketStats, name: str) -> float | None:
    value: float | None = getattr(stats.worst, name) if stats.worst is not None else None
    return value


def _slowest(stats: BucketStats) -> int:
    return stats.worst.count if stats.worst is not None else 0


COLUMNS: tuple[Column, ...] = (
    *_spread_columns("latency (main call)", lambda s: s.latency, _seconds, _same),
    *_spread_columns("side calls (summary, embeddings)", lambda s: s.side_seconds, _seconds, _same,
                     shaded=False),
    *_spread_columns("time to first token", lambda s: s.ttft, _seconds, _same),
    *_spread_columns("ttft per 1K input", lambda s: s.ttft_per_1k, _seconds, _same, "ttft_per_1k"),
    *_spread_columns("output tokens", lambda s: s.output_tokens, _plain, _inverse),
    *_spread_columns("tokens / s", lambda s: s.tokens_per_second, _plain, _inverse, "tokens_per_second",
                     ceiling=_speed_ceiling),
    *_spread_columns("mean logprob", lambda s: s.logprob_mean, _plain, _negative, "logprob_mean"),
    Column("rates", "errors", lambda s: s.error_rate, lambda s: s.count, _share, _same, "rate", "error_rate"),
    Column("rates", "length|empty", lambda s: s.length_or_empty_share, lambda s: s.answered, _share, _same,
           "rate", "length_or_empty"),
    Column("rates", "probe recall", lambda s: s.probes.recall, lambda s: s.probes.total, _share, _miss,
           "rate", "probe_recall", needs="probes"),
    Column("slowest 10%", "logprob p10", lambda s: _worst(s, "logprob_mean_p10"), _slowest, _plain,
           _negative),
    Column("slowest 10%", "output p10", lambda s: _worst(s, "output_tokens_p10"), _slowest, _plain,
           _inverse),
)  # fmt: skip
