"""The distributions an experiment compares, for one group of pairs (a context bucket, or all of them).

``side_stats`` gives one model's calls: p10/p50/p90 of latency, time to first token and output tokens
over the calls that answered (an error's latency is its timeout, not the model's speed: errors count
apart, as a rate and by kind), and of the cost per request over every call (an error is billed too);
the finish-reason and action mixes. ``agreement_stats`` gives the shadow pairs' agreement: the score's
spread, the share of tool pairs with the same tool and the same arguments, the methods used, the
judge's scores, and the request ids of the pairs that agreed least. Never an average.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from gateway.experiments.report.records import Arm, Pair, Side
from gateway.sampling.percentiles import Spread, spread

WORST_EXAMPLES = 5


@dataclass(frozen=True, slots=True)
class SideStats:
    count: int = 0
    """Calls (sides present)."""
    answered: int = 0
    models: dict[str, int] = field(default_factory=dict)
    latency_ms: Spread | None = None
    ttft_ms: Spread | None = None
    output_tokens: Spread | None = None
    cost_nanos: Spread | None = None
    """Per request, every call (errors are billed too)."""
    cost_total_nanos: int = 0
    finish_reasons: dict[str, int] = field(default_factory=dict)
    """Among the answered calls, the most common first; ``none`` when the upstream gave none."""
    errors: dict[str, int] = field(default_factory=dict)
    """Failed calls by kind (``timeout``, ``upstream_error``, …)."""
    actions: dict[str, int] = field(default_factory=dict)
    """What the gateway did with the call's request (``forward``, ``compress``, …)."""

    @property
    def failed(self) -> int:
        return self.count - self.answered

    @property
    def error_rate(self) -> float | None:
        return self.failed / self.count if self.count else None

    def finish_share(self, reason: str) -> float | None:
        return self.finish_reasons.get(reason, 0) / self.answered if self.answered else None


def side_stats(sides: Iterable[Side]) -> SideStats:
    calls = list(sides)
    if not calls:
        return SideStats()
    answered = [side for side in calls if side.answered]
    return SideStats(
        count=len(calls),
        answered=len(answered),
        models=_mix(side.model for side in calls),
        latency_ms=spread(side.latency_ms for side in answered),
        ttft_ms=spread(side.ttft_ms for side in answered),
        output_tokens=spread(_float(side.output_tokens) for side in answered),
        cost_nanos=spread(float(side.cost_nanos) for side in calls),
        cost_total_nanos=sum(side.cost_nanos for side in calls),
        finish_reasons=_mix(side.finish_reason or "none" for side in answered),
        errors=_mix(side.error for side in calls if side.error is not None),
        actions=_mix(side.action for side in calls if side.action is not None),
    )


@dataclass(frozen=True, slots=True)
class Example:
    """A pair that agreed little: where to look first."""

    request_id: str
    time_ms: int
    score: float
    kind: str
    judge: float | None


@dataclass(frozen=True, slots=True)
class AgreementStats:
    count: int = 0
    """Pairs with an agreement score."""
    score: Spread | None = None
    tool_pairs: int = 0
    """Pairs whose agreement is about tools (either answer called one)."""
    same_tool: int = 0
    same_args: int = 0
    methods: dict[str, int] = field(default_factory=dict)
    judge: Spread | None = None
    judge_models: dict[str, int] = field(default_factory=dict)
    worst: tuple[Example, ...] = ()
    """The lowest scores, lowest first."""

    @property
    def same_tool_share(self) -> float | None:
        return self.same_tool / self.tool_pairs if self.tool_pairs else None

    @property
    def same_args_share(self) -> float | None:
        return self.same_args / self.tool_pairs if self.tool_pairs else None


def agreement_stats(pairs: Sequence[Pair]) -> AgreementStats:
    scored = [pair for pair in pairs if pair.agreement is not None]
    judged = [pair.judge for pair in pairs if pair.judge is not None]
    tools = [
        pair.agreement for pair in scored if pair.agreement is not None and pair.agreement.kind == "tool"
    ]
    lowest = sorted(scored, key=lambda pair: (_score(pair), pair.time_ms, pair.request_id))
    return AgreementStats(
        count=len(scored),
        score=spread(_score(pair) for pair in scored),
        tool_pairs=len(tools),
        same_tool=sum(1 for found in tools if found.same_tool),
        same_args=sum(1 for found in tools if found.same_args),
        methods=_mix(pair.agreement.method for pair in scored if pair.agreement is not None),
        judge=spread(judge.score for judge in judged),
        judge_models=_mix(judge.model for judge in judged if judge.model is not None),
        worst=tuple(
            Example(
                request_id=pair.request_id,
                time_ms=pair.time_ms,
                score=_score(pair),
                kind=pair.agreement.kind if pair.agreement is not None else "",
                judge=pair.judge.score if pair.judge is not None else None,
            )
            for pair in lowest[:WORST_EXAMPLES]
        ),
    )


@dataclass(frozen=True, slots=True)
class Comparison:
    """Primary against candidate over one group of pairs. Shadow: both sides of the same requests; split:
    the primary arm's requests against the candidate arm's (different requests), without agreement."""

    pairs: int
    primary: SideStats
    candidate: SideStats
    agreement: AgreementStats | None
    cost_basis: tuple[int, int, int, int] = (0, 0, 0, 0)
    """What the cost ratio is computed from: (primary nanos, primary calls, candidate nanos, candidate
    calls) over the answered calls; in shadow mode only the pairs where both sides answered."""

    def arm_count(self, arm: Arm) -> int:
        return (self.primary if arm == "primary" else self.candidate).count


def compare(pairs: Sequence[Pair], *, shadow: bool) -> Comparison:
    if shadow:
        both = [(pair.primary, pair.candidate) for pair in pairs]
        answered = [(p, c) for p, c in both if p is not None and c is not None and p.answered and c.answered]
        basis = (
            sum(p.cost_nanos for p, _ in answered), len(answered),
            sum(c.cost_nanos for _, c in answered), len(answered),
        )  # fmt: skip
        return Comparison(
            pairs=len(pairs),
            primary=side_stats(side for side, _ in both if side is not None),
            candidate=side_stats(side for _, side in both if side is not None),
            agreement=agreement_stats(pairs),
            cost_basis=basis,
        )
    primary = [side for pair in pairs if pair.arm == "primary" and (side := pair.primary) is not None]
    candidate = [side for pair in pairs if pair.arm == "candidate" and (side := pair.candidate) is not None]
    primary_answered = [side.cost_nanos for side in primary if side.answered]
    candidate_answered = [side.cost_nanos for side in candidate if side.answered]
    return Comparison(
        pairs=len(pairs),
        primary=side_stats(primary),
        candidate=side_stats(candidate),
        agreement=None,
        cost_basis=(
            sum(primary_answered),
            len(primary_answered),
            sum(candidate_answered),
            len(candidate_answered),
        ),
    )


def _score(pair: Pair) -> float:
    return pair.agreement.score if pair.agreement is not None else 1.0


def _mix(values: Iterable[str | None]) -> dict[str, int]:
    return dict(Counter(value for value in values if value is not None).most_common())


def _float(value: int | None) -> float | None:
    return float(value) if value is not None else None
