"""What a shadow call holds against its experiment's daily budget, and what the process knows of that
budget between calls.

When the budget refuses a hold, the refusal says what the day's limit leaves above what is spent already
(``BudgetExceeded.room_nanos``, holds of calls in flight aside). Spend only grows within a day, so until
the next UTC midnight, or until the budget is changed, no hold above that room can pass: such calls are
skipped here, counted ``over_budget``, without asking Redis (and without planning the call when even its
least possible hold is above the room). A call that may be held for less is still tried. So a refused
request (``max_tokens: 100000, n: 4``) or the holds of calls in flight skip only the calls that cannot
fit, and a budget that is used up stops every further attempt at the cost of a comparison.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from gateway.config.runtime import Runtime
from gateway.config.schema.experiments import ExperimentConfig
from gateway.core.metering import max_cost_nanos
from gateway.experiments.job import ShadowJob
from gateway.experiments.judge import JUDGE_MAX_TOKENS
from gateway.ledger.period import MS_PER_DAY

COMPARED_TOKENS = 8_000
"""The input a comparison call is held for: the judge's excerpts of the question and both answers, or
the two answers embedded."""


def output_caps(job: ShadowJob) -> Mapping[str, Any]:
    """The fields of the request that cap its output (``max_tokens``, ``n``...), as the hold reads them."""
    return job.front.caps(job.body)


def comparison_ceiling_nanos(runtime: Runtime, experiment: ExperimentConfig) -> int:
    """The most the comparison's calls can cost: the judge reads both answers (at most the candidate's
    output cap each, plus the question excerpt), the embeddings both texts."""
    models = runtime.config.models
    total = 0
    if experiment.judge is not None:
        judge = models.get(experiment.judge.model)
        total += max_cost_nanos(judge, COMPARED_TOKENS, {"max_tokens": JUDGE_MAX_TOKENS})
    if experiment.embedding_model is not None:
        embedder = models.get(experiment.embedding_model)
        total += max_cost_nanos(embedder, COMPARED_TOKENS, {}, output=False)
    return total


def least_hold_nanos(runtime: Runtime, experiment: ExperimentConfig, job: ShadowJob) -> int:
    """No more than any hold the job's call can take, whatever its prompt counts: its output caps on the
    candidate, and the comparison's calls."""
    candidate = runtime.config.models.get(experiment.candidate)
    return max_cost_nanos(candidate, 0, output_caps(job)) + comparison_ceiling_nanos(runtime, experiment)


@dataclass(frozen=True, slots=True)
class _Room:
    nanos: int
    until_ms: int
    budget: Decimal | None


@dataclass(slots=True)
class Rooms:
    """Per experiment, the most its budget can still hold today, as learned from its last refusal."""

    known: dict[str, _Room] = field(default_factory=dict)

    def of(self, name: str, experiment: ExperimentConfig, now_ms: int) -> int | None:
        """The room left today (None: not known, nothing was refused today under this budget)."""
        room = self.known.get(name)
        if room is None:
            return None
        if now_ms < room.until_ms and room.budget == experiment.budget_usd_per_day:
            return room.nanos
        del self.known[name]
        return None

    def refused(self, name: str, experiment: ExperimentConfig, room_nanos: int, now_ms: int) -> int:
        """Learn from a refusal; the room now known."""
        known = self.of(name, experiment, now_ms)
        nanos = room_nanos if known is None else min(known, room_nanos)
        midnight = (now_ms // MS_PER_DAY + 1) * MS_PER_DAY
        self.known[name] = _Room(nanos, midnight, experiment.budget_usd_per_day)
        return nanos
