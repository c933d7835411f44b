"""What all matching traffic would have cost on the candidate, per context bucket, projected to a month.

For a bucket: (the matching requests' primary cost in the window) x (candidate / primary cost per
request over the bucket's pairs) - (that primary cost), scaled to 30 days from the span the traffic
counters cover. The ratio is the ratio of total costs over the pairs where both sides answered (split:
of the mean cost per answered request of each arm), so a failed candidate call, cheap because it did
nothing, does not flatter it. A bucket with no such pairs projects nothing and says why. Exact: integer
nano-dollars through fractions, rounded once at the end.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

MONTH_MS = 30 * 86_400_000


@dataclass(frozen=True, slots=True)
class Projection:
    matching: int
    """Matching requests counted in the window."""
    matching_cost_nanos: int
    """Their cost as counted (the primary's)."""
    ratio: Fraction | None
    """Candidate cost per request over the primary's, None when it cannot be known."""
    basis: int
    """The calls behind the ratio (pairs where both answered; split: the smaller arm)."""
    window_difference_nanos: int | None
    monthly_difference_nanos: int | None
    note: str | None = None
    """Why nothing is projected."""

    @property
    def projected(self) -> bool:
        return self.monthly_difference_nanos is not None


def project(
    *,
    matching: int,
    matching_cost_nanos: int,
    pairs: int,
    cost_basis: tuple[int, int, int, int],
    span_ms: int,
) -> Projection:
    """``cost_basis``: (primary nanos, primary calls, candidate nanos, candidate calls) the ratio comes
    from; ``span_ms``: how long the traffic counters cover."""
    primary_nanos, primary_calls, candidate_nanos, candidate_calls = cost_basis
    basis = min(primary_calls, candidate_calls)

    def nothing(note: str, ratio: Fraction | None = None) -> Projection:
        return Projection(matching, matching_cost_nanos, ratio, basis, None, None, note)

    if pairs == 0:
        return nothing("no pairs: projects nothing")
    if basis == 0:
        return nothing("no pair where both sides answered: projects nothing")
    if primary_nanos <= 0:
        return nothing("the primary's sampled cost is zero: no cost ratio")
    ratio = Fraction(candidate_nanos * primary_calls, primary_nanos * candidate_calls)
    if matching == 0:
        return nothing("no matching traffic counted: projects nothing", ratio)
    window = matching_cost_nanos * ratio - matching_cost_nanos
    monthly = window * MONTH_MS / max(span_ms, 1)
    return Projection(matching, matching_cost_nanos, ratio, basis, round(window), round(monthly))


@dataclass(frozen=True, slots=True)
class ProjectionTotal:
    monthly_difference_nanos: int
    projected: tuple[str, ...]
    """Labels of the buckets that projected something."""
    unprojected: tuple[str, ...]
    """Labels of the buckets with matching traffic that projected nothing."""
    unprojected_cost_nanos: int
    """The matching cost of those buckets, left out of the total."""


def total(projections: Sequence[tuple[str, Projection]]) -> ProjectionTotal:
    done = [(label, found) for label, found in projections if found.projected]
    left = [(label, found) for label, found in projections if not found.projected and found.matching]
    return ProjectionTotal(
        monthly_difference_nanos=sum(found.monthly_difference_nanos or 0 for _, found in done),
        projected=tuple(label for label, _ in done),
        unprojected=tuple(label for label, _ in left),
        unprojected_cost_nanos=sum(found.matching_cost_nanos for _, found in left),
    )
