"""An experiment's report: primary against candidate by context bucket, the cost projection, the verdicts.

``build_report`` is pure: the caller reads the pairs and the traffic counters from Redis
(``gateway.experiments.store``) and the shadow spend of the day from the ledger. A pair's bucket is its
prompt size as received (``tokens``), and a stored ``n:<low>`` / ``cost:<low>`` goes to the bucket holding
``low``, so counters written under other edges still land somewhere sensible. Buckets shown: those with
pairs or matching traffic, and those a shadow experiment's ``match`` token range covers. Pairs of the
other mode (an experiment switched from shadow to split within the window) are counted and left out.
Traffic is counted in whole UTC days, so the projection scales from the start of the first day that has
counters, not from ``since``. ``report_document`` is the JSON form.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gateway.base.money import nanos_from_usd, usd
from gateway.config.schema.experiments import ExperimentConfig
from gateway.experiments.report.comparison import AgreementStats, Comparison, SideStats, compare
from gateway.experiments.report.projection import Projection, ProjectionTotal, project, total
from gateway.experiments.report.records import Mode, Pair, parse_pair
from gateway.experiments.report.verdict import Verdict, overall, projection_line, verdict
from gateway.experiments.shed import COUNTERS as SHED_COUNTERS
from gateway.experiments.shed import shed_note
from gateway.ledger.period import MS_PER_DAY, iso_time
from gateway.sampling.percentiles import Spread
from gateway.tokens.buckets import Bucket, bucket_index, buckets_for

COUNTERS = (
    "shadowed",
    "shed",
    "over_budget",
    "failed",
    "oversized",
    "excluded",
    "split_candidate",
    "split_primary",
    "split_full",
    *SHED_COUNTERS,
)
"""The traffic totals: mirrored, shed (no free slot, gateway busy; and by reason,
``gateway.experiments.shed``), over the day's budget, candidate failed (of which its answer was too long to
read), tenant excluded, and split routing's decisions (of the primary's, new conversations kept there
because the experiment remembers as many as it may)."""
MODE_COUNTERS = {
    "shadow": ("shadowed", "shed", "over_budget", "failed", "oversized", "excluded"),
    "split": ("split_candidate", "split_primary", "split_full", "excluded"),
}


@dataclass(frozen=True, slots=True)
class BucketReport:
    bucket: Bucket
    comparison: Comparison
    projection: Projection
    verdict: Verdict


@dataclass(frozen=True, slots=True)
class ExperimentReport:
    name: str
    config: ExperimentConfig | None
    """None: not (or no longer) configured; the report is of its data alone."""
    mode: Mode
    since_ms: int
    until_ms: int
    traffic_since_ms: int
    """The start of the span the traffic counters cover (a UTC midnight)."""
    min_samples: int
    buckets: tuple[BucketReport, ...]
    overall: Comparison
    projection: ProjectionTotal
    verdict: tuple[str, ...]
    counters: dict[str, int]
    matching: int
    matching_cost_nanos: int
    budget_nanos: int | None
    spent_today_nanos: int
    unreadable: int = 0
    """Entries that are not pairs the report can use."""
    other_mode: int = 0
    oldest_ms: int | None = None
    """The oldest pair read: a capped stream may hold less than the window asked for."""

    @property
    def pairs(self) -> int:
        return self.overall.pairs

    def headline(self) -> str:
        """The projected monthly difference: what a reader came for, so every form of the report puts it
        first (the verdicts repeat it)."""
        thin = [
            item.bucket.label for item in self.buckets if item.comparison.pairs and not item.verdict.enough
        ]
        found = projection_line(self.projection, thin)
        if found is not None:
            return found
        return (
            "projected difference a month: none yet (no bucket has both answered pairs and matching traffic)"
        )

    def shed_note(self) -> str | None:
        """``shed N`` and why (shadow mode); None when nothing was shed."""
        if self.mode != "shadow":
            return None
        return shed_note(self.counters, self.config.max_concurrency if self.config is not None else None)

    def mode_counters(self) -> dict[str, int]:
        """The counters that concern the report's mode, for people (the JSON form keeps them all)."""
        return {name: self.counters.get(name, 0) for name in MODE_COUNTERS[self.mode]}


def build_report(
    name: str,
    config: ExperimentConfig | None,
    pairs: Sequence[Mapping[str, Any]],
    traffic: Mapping[str, int],
    *,
    edges: Sequence[int],
    since_ms: int,
    until_ms: int,
    spent_today_nanos: int,
    min_samples: int = 30,
    traffic_since_ms: int | None = None,
) -> ExperimentReport:
    """``traffic``: the counters summed over the window's days; ``traffic_since_ms``: where the days
    that hold them begin (default: the UTC midnight before ``since_ms``)."""
    parsed, unreadable = _parse(pairs)
    mode = _mode(config, parsed, traffic)
    kept = [pair for pair in parsed if pair.mode == mode]
    shadow = mode == "shadow"
    buckets = buckets_for(edges)
    grouped: list[list[Pair]] = [[] for _ in buckets]
    for pair in kept:
        grouped[bucket_index(pair.tokens, edges)].append(pair)
    matching, matching_cost = _matching(traffic, edges, len(buckets))
    start = traffic_since_ms if traffic_since_ms is not None else since_ms - since_ms % MS_PER_DAY
    span = until_ms - start
    shown = []
    for bucket in buckets:
        index = bucket.index
        if not (grouped[index] or matching[index] or _in_range(bucket, config)):
            continue
        comparison = compare(grouped[index], shadow=shadow)
        found = project(
            matching=matching[index],
            matching_cost_nanos=matching_cost[index],
            pairs=len(grouped[index]),
            cost_basis=comparison.cost_basis,
            span_ms=span,
        )
        judged = verdict(bucket.label, comparison, mode=mode, min_samples=min_samples)
        shown.append(BucketReport(bucket, comparison, found, judged))
    projection = total([(shown_bucket.bucket.label, shown_bucket.projection) for shown_bucket in shown])
    pooled = compare(kept, shadow=shadow)
    thin = [item.bucket.label for item in shown if item.comparison.pairs and not item.verdict.enough]
    with_pairs = sum(1 for item in shown if item.comparison.pairs)
    lines = overall(
        pooled, thin, projection, mode=mode, min_samples=min_samples, buckets_with_pairs=with_pairs
    )
    budget = config.budget_usd_per_day if config is not None else None
    return ExperimentReport(
        name=name,
        config=config,
        mode=mode,
        since_ms=since_ms,
        until_ms=until_ms,
        traffic_since_ms=start,
        min_samples=min_samples,
        buckets=tuple(shown),
        overall=pooled,
        projection=projection,
        verdict=lines,
        counters={counter: int(traffic.get(counter, 0)) for counter in COUNTERS},
        matching=sum(matching),
        matching_cost_nanos=sum(matching_cost),
        budget_nanos=nanos_from_usd(budget) if budget is not None else None,
        spent_today_nanos=spent_today_nanos,
        unreadable=unreadable,
        other_mode=len(parsed) - len(kept),
        oldest_ms=min((pair.time_ms for pair in parsed), default=None),
    )


def _parse(pairs: Sequence[Mapping[str, Any]]) -> tuple[list[Pair], int]:
    parsed = []
    for data in pairs:
        try:
            parsed.append(parse_pair(data))
        except ValueError:
            continue
    return parsed, len(pairs) - len(parsed)


def _mode(config: ExperimentConfig | None, pairs: Sequence[Pair], traffic: Mapping[str, int]) -> Mode:
    if config is not None:
        return config.mode
    if pairs:
        return Counter(pair.mode for pair in pairs).most_common(1)[0][0]
    return "split" if traffic.get("split_candidate") or traffic.get("split_primary") else "shadow"


def _matching(traffic: Mapping[str, int], edges: Sequence[int], size: int) -> tuple[list[int], list[int]]:
    """Matching requests and their cost per bucket, from the ``n:<low>`` and ``cost:<low>`` counters."""
    counts, costs = [0] * size, [0] * size
    for field, value in traffic.items():
        kind, _, low = field.partition(":")
        if kind not in ("n", "cost") or not low.isdigit():
            continue
        target = counts if kind == "n" else costs
        target[bucket_index(int(low), edges)] += int(value)
    return counts, costs


def _in_range(bucket: Bucket, config: ExperimentConfig | None) -> bool:
    """The bucket overlaps a shadow experiment's ``match`` token range (never the overflow bucket; split
    routes before counting, so its range says nothing of where its pairs fall)."""
    if config is None or config.mode != "shadow" or bucket.high is None:
        return False
    low, high = config.match.min_tokens, config.match.max_tokens
    return bucket.high > low and (high is None or bucket.low < high)


# --- the JSON form ------------------------------------------------------------------------------------


def report_document(report: ExperimentReport) -> dict[str, Any]:
    config = report.config
    budget = report.budget_nanos
    return {
        "object": "gateway.experiment_report",
        "name": report.name,
        "configured": config is not None,
        "mode": report.mode,
        "primary": list(config.primary) if config is not None else _models(report.overall.primary),
        "candidate": config.candidate if config is not None else _first(report.overall.candidate),
        "sample_rate": config.sample_rate if config is not None else None,
        "enabled": config.enabled if config is not None else None,
        "since": iso_time(report.since_ms),
        "until": iso_time(report.until_ms),
        "traffic_since": iso_time(report.traffic_since_ms),
        "bucketed_by": "prompt_tokens",
        "min_samples": report.min_samples,
        "pairs": report.pairs,
        "unreadable_pairs": report.unreadable,
        "other_mode_pairs": report.other_mode,
        "oldest_pair": iso_time(report.oldest_ms) if report.oldest_ms is not None else None,
        "budget": {
            "usd_per_day": usd(budget, trim=True) if budget is not None else None,
            "spent_today_usd": usd(report.spent_today_nanos),
            "remaining_today_usd": _usd(_remaining(report)),
        },
        "counters": report.counters,
        "matching": {"requests": report.matching, "cost_usd": usd(report.matching_cost_nanos)},
        "buckets": [bucket_document(item) for item in report.buckets],
        "overall": {
            **comparison_document(report.overall),
            "monthly_difference_usd": usd(report.projection.monthly_difference_nanos)
            if report.projection.projected else None,
            "projected_buckets": list(report.projection.projected),
            "unprojected_buckets": list(report.projection.unprojected),
            "unprojected_cost_usd": usd(report.projection.unprojected_cost_nanos),
        },
        "verdict": list(report.verdict),
    }  # fmt: skip


def bucket_document(item: BucketReport) -> dict[str, Any]:
    found = item.projection
    return {
        "bucket": item.bucket.label,
        "min_tokens": item.bucket.low,
        "max_tokens": item.bucket.high,
        **comparison_document(item.comparison),
        "enough_pairs": item.verdict.enough,
        "cost": {
            "matching_requests": found.matching,
            "matching_cost_usd": usd(found.matching_cost_nanos),
            "ratio": round(float(found.ratio), 4) if found.ratio is not None else None,
            "ratio_basis": found.basis,
            "window_difference_usd": _usd(found.window_difference_nanos),
            "monthly_difference_usd": _usd(found.monthly_difference_nanos),
            "note": found.note,
        },
        "verdict": item.verdict.text,
    }


def comparison_document(comparison: Comparison) -> dict[str, Any]:
    return {
        "pairs": comparison.pairs,
        "primary": side_document(comparison.primary),
        "candidate": side_document(comparison.candidate),
        "agreement": agreement_document(comparison.agreement) if comparison.agreement is not None else None,
    }


def side_document(side: SideStats) -> dict[str, Any]:
    return {
        "calls": side.count,
        "answered": side.answered,
        "models": side.models,
        "latency_ms": _spread(side.latency_ms),
        "ttft_ms": _spread(side.ttft_ms),
        "output_tokens": _spread(side.output_tokens),
        "cost_per_request_usd": _money_spread(side.cost_nanos),
        "cost_usd": usd(side.cost_total_nanos),
        "finish_reasons": side.finish_reasons,
        "errors": side.errors,
        "error_rate": round(side.error_rate, 4) if side.error_rate is not None else None,
        "actions": side.actions,
    }


def agreement_document(agreement: AgreementStats) -> dict[str, Any]:
    def rounded(value: float | None) -> float | None:
        return round(value, 4) if value is not None else None

    return {
        "scored": agreement.count,
        "score": _spread(agreement.score),
        "methods": agreement.methods,
        "tool_pairs": agreement.tool_pairs,
        "same_tool": agreement.same_tool,
        "same_args": agreement.same_args,
        "same_tool_share": rounded(agreement.same_tool_share),
        "same_args_share": rounded(agreement.same_args_share),
        "judge": _spread(agreement.judge),
        "judge_models": agreement.judge_models,
        "worst": [
            {
                "request_id": found.request_id,
                "time": iso_time(found.time_ms) if found.time_ms else None,
                "score": round(found.score, 4),
                "kind": found.kind,
                "judge": rounded(found.judge),
            }
            for found in agreement.worst
        ],
    }


def _models(side: SideStats) -> list[str]:
    return list(side.models)


def _remaining(report: ExperimentReport) -> int | None:
    budget = report.budget_nanos
    return max(0, budget - report.spent_today_nanos) if budget is not None else None


def _first(side: SideStats) -> str | None:
    """The side's most common model."""
    return next(iter(side.models), None)


def _spread(found: Spread | None) -> dict[str, float | int] | None:
    return found.as_dict() if found is not None else None


def _money_spread(found: Spread | None) -> dict[str, str | int] | None:
    if found is None:
        return None
    values = {which: usd(round(getattr(found, which)), trim=True) for which in ("p10", "p50", "p90")}
    return {"count": found.count, **values}


def _usd(nanos: int | None) -> str | None:
    return usd(nanos) if nanos is not None else None
