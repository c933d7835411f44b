"""The rows of the experiment report's HTML table: for each signal, how to read it from a bucket, the count
behind it, how to show it, and how the candidate's cell is judged against the primary's.

Side signals come as p10, p50 and p90, each a primary row then a candidate row, so the two numbers to
compare sit one above the other. A candidate cell is shaded by how much worse it is than the primary's
cell of the same bucket and percentile (``gateway.sampling.report.shading.severity``: green as good or better,
red at ``factor`` times worse or more); output tokens are shown, not judged (shorter is not worse in
itself), and primary cells are the reference, plain. Agreement is shaded on its own scale, from 1 (the
same answer, green) to 0 (red). A cell is trusted when its bucket has enough pairs (``min_samples``; split:
in each arm) and, for a distribution, it has that many values itself; untrusted cells are greyed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from gateway.config.schema.sampling import BoundaryConfig
from gateway.experiments.report.comparison import AgreementStats, SideStats
from gateway.experiments.report.figures import dollars, milliseconds, plain, share
from gateway.experiments.report.records import Arm
from gateway.experiments.report.report import BucketReport
from gateway.sampling.percentiles import Spread
from gateway.sampling.report.shading import Kind, severity

SHADING = BoundaryConfig()
"""The behaviour map's yardstick: red at 1.5x worse (rates: from 2% up, by at least 5 points)."""

Value = Callable[[BucketReport], float | None]
Count = Callable[[BucketReport], int]
Shade = Callable[[BucketReport], float | None]
Needs = Literal["cell", "bucket"]


@dataclass(frozen=True, slots=True)
class Row:
    group: str
    name: str
    value: Value
    count: Count
    """The observations behind the value, shown in the cell."""
    show: Callable[[float], str]
    shade: Shade | None = None
    """0 (as good as the primary or better) to 1 (``factor`` times worse); None: shown, not judged."""
    needs: Needs = "cell"
    """``cell``: trusted when its own count reaches ``min_samples`` too; ``bucket``: when its bucket does."""

    def trusted(self, item: BucketReport, min_samples: int) -> bool:
        return item.verdict.enough and (self.needs == "bucket" or self.count(item) >= min_samples)


def _side(item: BucketReport, arm: Arm) -> SideStats:
    return item.comparison.primary if arm == "primary" else item.comparison.candidate


def _spread_of(signal: str, arm: Arm) -> Callable[[BucketReport], Spread | None]:
    def found(item: BucketReport) -> Spread | None:
        value: Spread | None = getattr(_side(item, arm), signal)
        return value

    return found


def _pick(signal: str, arm: Arm, which: str) -> Value:
    def value(item: BucketReport) -> float | None:
        found = _spread_of(signal, arm)(item)
        return float(getattr(found, which)) if found is not None else None

    return value


def _counted(signal: str, arm: Arm) -> Count:
    def count(item: BucketReport) -> int:
        found = _spread_of(signal, arm)(item)
        return found.count if found is not None else 0

    return count


def _against_primary(primary: Value, candidate: Value, kind: Kind) -> Shade:
    def shade(item: BucketReport) -> float | None:
        mine, theirs = candidate(item), primary(item)
        if mine is None or theirs is None:
            return None
        return severity(mine, theirs, kind, SHADING)

    return shade


def side_rows(
    group: str, signal: str, show: Callable[[float], str], *, judged: bool, split: bool
) -> list[Row]:
    rows = []
    for which in ("p10", "p50", "p90"):
        primary, candidate = _pick(signal, "primary", which), _pick(signal, "candidate", which)
        shade = _against_primary(primary, candidate, "level") if judged else None
        for arm, value, judge in (("primary", primary, None), ("candidate", candidate, shade)):
            label = f"{which} {arm}{' arm' if split else ''}"
            rows.append(Row(group, label, value, _counted(signal, arm), show, judge))  # type: ignore[arg-type]
    return rows


def _rate_rows(group: str, rate: Callable[[SideStats], float | None], base: Callable[[SideStats], int],
               split: bool) -> list[Row]:  # fmt: skip
    def value(arm: Arm) -> Value:
        return lambda item: rate(_side(item, arm))

    def count(arm: Arm) -> Count:
        return lambda item: base(_side(item, arm))

    shade = _against_primary(value("primary"), value("candidate"), "rate")
    suffix = " arm" if split else ""
    return [
        Row(group, f"primary{suffix}", value("primary"), count("primary"), _percent, needs="bucket"),
        Row(group, f"candidate{suffix}", value("candidate"), count("candidate"), _percent, shade, "bucket"),
    ]


def _agreement(item: BucketReport) -> AgreementStats | None:
    return item.comparison.agreement


def _score(which: str) -> Value:
    def value(item: BucketReport) -> float | None:
        found = _agreement(item)
        score = found.score if found is not None else None
        return float(getattr(score, which)) if score is not None else None

    return value


def _scored(item: BucketReport) -> int:
    found = _agreement(item)
    return found.count if found is not None else 0


def _tool_share(name: str) -> Value:
    def value(item: BucketReport) -> float | None:
        found = _agreement(item)
        result: float | None = getattr(found, name) if found is not None else None
        return result

    return value


def _tool_pairs(item: BucketReport) -> int:
    found = _agreement(item)
    return found.tool_pairs if found is not None else 0


def _judge(which: str) -> Value:
    def value(item: BucketReport) -> float | None:
        found = _agreement(item)
        judge = found.judge if found is not None else None
        return float(getattr(judge, which)) if judge is not None else None

    return value


def _judged(item: BucketReport) -> int:
    found = _agreement(item)
    return found.judge.count if found is not None and found.judge is not None else 0


def _absolute(value: Value) -> Shade:
    """Agreement's own scale: 1 is the same answer (green), 0 none of it (red)."""

    def shade(item: BucketReport) -> float | None:
        found = value(item)
        return None if found is None else 1 - min(1.0, max(0.0, found))

    return shade


def agreement_rows() -> list[Row]:
    rows = [Row("agreement", f"score {which}", _score(which), _scored, _fraction, _absolute(_score(which)))
            for which in ("p10", "p50", "p90")]  # fmt: skip
    rows += [
        Row("agreement", "same tool", _tool_share("same_tool_share"), _tool_pairs, _percent,
            _absolute(_tool_share("same_tool_share"))),
        Row("agreement", "same arguments", _tool_share("same_args_share"), _tool_pairs, _percent,
            _absolute(_tool_share("same_args_share"))),
    ]  # fmt: skip
    rows += [Row("agreement", f"judge {which}", _judge(which), _judged, _fraction, _absolute(_judge(which)))
             for which in ("p10", "p50", "p90")]  # fmt: skip
    return rows


def _cost(arm: Arm) -> Value:
    return lambda item: float(_side(item, arm).cost_total_nanos) if _side(item, arm).count else None


def _calls(arm: Arm) -> Count:
    return lambda item: _side(item, arm).count


def _ratio(item: BucketReport) -> float | None:
    found = item.projection.ratio
    return float(found) if found is not None else None


def _monthly(item: BucketReport) -> float | None:
    found = item.projection.monthly_difference_nanos
    return float(found) if found is not None else None


def _basis(item: BucketReport) -> int:
    return item.projection.basis


def cost_rows(*, split: bool) -> list[Row]:
    suffix = " arm" if split else ""
    return [
        Row("cost", f"sampled primary{suffix}", _cost("primary"), _calls("primary"), dollars, needs="bucket"),
        Row("cost", f"sampled candidate{suffix}", _cost("candidate"), _calls("candidate"), dollars,
            needs="bucket"),
        Row("cost", "candidate / primary", _ratio, _basis, _ratio_text, needs="bucket"),
        Row("cost", "matching in window", lambda item: float(item.projection.matching_cost_nanos),
            lambda item: item.projection.matching, dollars, needs="bucket"),
        Row("cost", "projected a month", _monthly, lambda item: item.projection.matching, dollars,
            needs="bucket"),
    ]  # fmt: skip


def rows_for(*, shadow: bool) -> list[Row]:
    split = not shadow
    rows = [
        *side_rows("latency (answered)", "latency_ms", milliseconds, judged=True, split=split),
        *side_rows("time to first token", "ttft_ms", milliseconds, judged=True, split=split),
        *side_rows("output tokens", "output_tokens", plain, judged=False, split=split),
        *side_rows("cost per request", "cost_nanos", dollars, judged=True, split=split),
        *_rate_rows("errors", lambda side: side.error_rate, lambda side: side.count, split),
        *_rate_rows("'length' finishes", lambda side: side.finish_share("length"), lambda side: side.answered,
                    split),
    ]  # fmt: skip
    if shadow:
        rows += agreement_rows()
    return rows + cost_rows(split=split)


def _percent(value: float) -> str:
    return share(value, 1)


def _fraction(value: float) -> str:
    return f"{value:.2f}"


def _ratio_text(value: float) -> str:
    return f"{value:.2f}x"
