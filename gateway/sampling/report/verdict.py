"""Why no boundary was found, in words an operator can act on.

"None found" means two different things: the report looked and nothing degraded, or it could not look
(fewer than two buckets had ``boundary.min_count`` samples). ``Coverage`` tells them apart. For needle
probes, recall that never fell is not necessarily recall that held: recall that is nil already at the
shortest length probed means the upstream is not answering the probe at all (a wrong model, an empty
answer, a ``max_tokens`` too small for a reasoning model), and no length boundary can be read from it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gateway.config.schema.sampling import BoundaryConfig
from gateway.sampling.probes.recall import RecallGrid
from gateway.sampling.report.report import BehaviourReport, BucketStats
from gateway.tokens.buckets import tokens_label

NOT_ANSWERING = "the upstream is not answering the probe"


@dataclass(frozen=True, slots=True)
class Coverage:
    """How many buckets had enough samples to be compared; the boundary needs two."""

    compared: int
    min_count: int

    @property
    def enough(self) -> bool:
        return self.compared >= 2

    def describe(self) -> str:
        if not self.enough:
            buckets = "bucket" if self.compared == 1 else "buckets"
            return (
                f"too few samples to look ({self.compared} {buckets} with at least {self.min_count} samples;"
                " two are needed to compare)"
            )
        return (
            f"none found across {self.compared} buckets with enough samples (at least {self.min_count} each)"
        )


def coverage(buckets: Sequence[BucketStats], config: BoundaryConfig) -> Coverage:
    return Coverage(sum(1 for stats in buckets if stats.enough_samples), config.min_count)


def boundary_note(report: BehaviourReport) -> str | None:
    """Why there is no boundary (None when there is one)."""
    if report.boundary is not None:
        return None
    return coverage(report.buckets, report.boundary_config).describe()


@dataclass(frozen=True, slots=True)
class RecallVerdict:
    """What recall says when no probed length's recall fell."""

    answering: bool
    """False: recall is nil at the shortest length probed, so the upstream is not answering the probe."""
    text: str

    def describe(self) -> str:
        """``none found (recall held across the probed lengths)``, ``none: the upstream is not …``."""
        return f"none found ({self.text})" if self.answering else f"none: {self.text}"


def silent_upstream(grid: RecallGrid, shortest: int) -> str | None:
    """Why the probes at the shortest length probed show an upstream that does not answer them (None when
    some recalled the needle there). ``grid`` holds answered probes only."""
    tally = grid.row(shortest)
    where = f"{tokens_label(shortest)}, the shortest length probed"
    if not tally.total:
        return f"no probe at {where}, was answered"
    if not tally.recalled:
        return f"recall is {tally} at {where}"
    return None


def recall_verdict(grid: RecallGrid, config: BoundaryConfig, *, shortest: int | None = None) -> RecallVerdict:
    """The verdict when no length boundary was found. ``shortest``: the shortest length probed, failed
    probes included (default: the shortest answered one)."""
    if shortest is None and grid.lengths:
        shortest = grid.lengths[0]
    silent = silent_upstream(grid, shortest) if shortest is not None else "no probe was answered"
    if silent is not None:
        return RecallVerdict(answering=False, text=f"{NOT_ANSWERING} ({silent})")
    compared = sum(1 for length in grid.lengths if grid.row(length).total >= config.min_probe_count)
    if compared < 2:
        needed = config.min_probe_count
        return RecallVerdict(True, f"too few probes to compare lengths (at least {needed} per length)")
    return RecallVerdict(answering=True, text="recall held across the probed lengths")
