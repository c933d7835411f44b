"""The verdict lines: what the data shows, in plain differences, and what it does not yet support.

A bucket with fewer than ``min_samples`` pairs (split: requests in either arm) is "too few to compare";
otherwise its line gives the candidate's p50 latency and time to first token as multiples of the
primary's, its output and cost per request p50 as changes, the error rates and ``length`` finishes when
either has any, and in shadow mode the agreement (same tool and same arguments among tool pairs, the
score's p50, the judge's). A signal is compared only when both sides answered ``min_samples`` times. No
line recommends anything: the reader decides, with the numbers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gateway.experiments.report.comparison import AgreementStats, Comparison, SideStats
from gateway.experiments.report.figures import change, dollars, share, times
from gateway.experiments.report.projection import ProjectionTotal
from gateway.experiments.report.records import Mode
from gateway.sampling.percentiles import Spread


@dataclass(frozen=True, slots=True)
class Verdict:
    enough: bool
    """Enough pairs to compare."""
    text: str


def verdict(label: str, comparison: Comparison, *, mode: Mode, min_samples: int) -> Verdict:
    """``"64K-128K: 12 pairs, too few to compare (30 needed)"`` or the differences."""
    primary, candidate = comparison.primary, comparison.candidate
    if mode == "shadow":
        counted = f"{comparison.pairs:,} pair{'' if comparison.pairs == 1 else 's'}"
        if comparison.pairs == 0:
            return Verdict(False, f"{label}: no pairs")
        if comparison.pairs < min_samples:
            return Verdict(False, f"{label}: {counted}, too few to compare ({min_samples} needed)")
    else:
        counted = f"{candidate.count:,} candidate-arm and {primary.count:,} primary-arm requests"
        if not comparison.pairs:
            return Verdict(False, f"{label}: no requests in either arm")
        if min(primary.count, candidate.count) < min_samples:
            return Verdict(
                False, f"{label}: {counted}, too few to compare ({min_samples} needed in each arm)"
            )
    found = differences(comparison, min_samples=min_samples, mode=mode)
    return Verdict(True, f"{label}: {counted}: {'; '.join(found) or 'no signal to compare'}")


def differences(comparison: Comparison, *, min_samples: int, mode: Mode) -> list[str]:
    primary, candidate = comparison.primary, comparison.candidate
    whose = "the primary's" if mode == "shadow" else "the primary arm's"
    found: list[str] = []
    thin = [
        f"{name} answered {side.answered:,} of {side.count:,}"
        for name, side in (("primary", primary), ("candidate", candidate))
        if side.answered < min_samples
    ]
    if thin:
        found.append(f"{' and '.join(thin)}: too few answers to compare latency and output")
    else:
        found += _levels(primary, candidate, whose)
    found += _rates(primary, candidate)
    if comparison.agreement is not None:
        found += agreement_parts(comparison.agreement)
    return found


def _levels(primary: SideStats, candidate: SideStats, whose: str) -> list[str]:
    found = []
    for name, signal in (("latency", "latency_ms"), ("time to first token", "ttft_ms")):
        mine, theirs = _p50(getattr(candidate, signal)), _p50(getattr(primary, signal))
        if mine is not None and theirs:
            found.append(f"candidate p50 {name} {times(mine / theirs)} {whose}")
    for name, signal in (("output", "output_tokens"), ("cost per request", "cost_nanos")):
        mine, theirs = _p50(getattr(candidate, signal)), _p50(getattr(primary, signal))
        moved = change(mine, theirs) if mine is not None and theirs is not None else None
        if moved is not None:
            found.append(f"{name} p50 {moved}")
    return found


def _rates(primary: SideStats, candidate: SideStats) -> list[str]:
    found = []
    if primary.failed or candidate.failed:
        found.append(f"errors {share(candidate.error_rate, 1)} vs {share(primary.error_rate, 1)}")
    mine, theirs = candidate.finish_share("length"), primary.finish_share("length")
    if mine or theirs:
        found.append(f"'length' finishes {share(mine, 1)} vs {share(theirs, 1)}")
    return found


def agreement_parts(agreement: AgreementStats) -> list[str]:
    found = []
    if agreement.tool_pairs:
        tools = agreement.tool_pairs
        found.append(
            f"same tool {share(agreement.same_tool_share)} ({agreement.same_tool}/{tools} tool pairs), same"
            f" arguments {share(agreement.same_args_share)} ({agreement.same_args}/{tools})"
        )
    if agreement.score is not None:
        found.append(f"agreement p50 {agreement.score.p50:.2f} (p10 {agreement.score.p10:.2f})")
    if agreement.judge is not None:
        found.append(f"judge p50 {agreement.judge.p50:.2f} ({agreement.judge.count:,} judged)")
    return found


def overall(
    comparison: Comparison,
    thin: Sequence[str],
    projection: ProjectionTotal,
    *,
    mode: Mode,
    min_samples: int,
    buckets_with_pairs: int,
) -> tuple[str, ...]:
    """The report's own lines: all pairs together, the buckets too thin to compare, the projection."""
    if not comparison.pairs:
        return ("overall: no pairs in the window: nothing to compare yet",)
    pooled = verdict(f"overall ({buckets_with_pairs} buckets pooled)", comparison, mode=mode,
                     min_samples=min_samples)  # fmt: skip
    lines = [pooled.text]
    if thin:
        lines.append(f"too few to compare in {', '.join(thin)} ({min_samples} needed in each bucket)")
    projected = projection_line(projection, thin)
    if projected is not None:
        lines.append(projected)
    if projection.unprojected:
        left = dollars(projection.unprojected_cost_nanos)
        lines.append(
            f"{', '.join(projection.unprojected)}: matching traffic ({left} in the window) with nothing to"
            " project from"
        )
    return tuple(lines)


def projection_line(projection: ProjectionTotal, thin: Sequence[str]) -> str | None:
    """The projected monthly difference for all matching traffic (None: no bucket projects anything)."""
    if not projection.projected:
        return None
    count = len(projection.projected)
    rough = [label for label in projection.projected if label in thin]
    line = (
        f"projected difference for all matching traffic: {dollars(projection.monthly_difference_nanos)}"
        f" a month, from {count} bucket{'s' if count != 1 else ''}"
    )
    return line + (f" (a rough figure from {', '.join(rough)}: too few pairs)" if rough else "")


def _p50(found: Spread | None) -> float | None:
    return found.p50 if found is not None else None
