"""The behaviour map: per context-length bucket, distributions (never only an average) of the signals.

``build_report(signals, probes, config=…)`` is pure: the caller reads Redis. A sample's bucket is the
tokens the model received (``Signal.context_tokens``: forwarded, else the prompt's), since that is what its
behaviour depends on; the size the gateway received from the client (the prompt tokens) is shown beside
it, with the action mix, so a bucket of compressed requests says so. For each bucket it gives the count
(and whether it reaches ``boundary.min_count``, below which it is shown but not compared), p10/p50/p90 of
latency (the main call's), the side calls' time, time to first token (and per 1K input tokens), output
tokens and tokens per second (of answers of at least ``boundary.min_answer_tokens``), the finish-reason
mix, the error rate, the share of ``length`` or empty finishes, probe recall, and the worst-experience
cell: the p10 of the quality signals among the slowest decile. The effective-context boundary is found
by ``gateway.sampling.report.boundary``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from gateway.config.schema.sampling import BoundaryConfig, SamplingConfig
from gateway.sampling.percentiles import Spread, percentile, spread
from gateway.sampling.probes.needle import ProbeResult
from gateway.sampling.probes.recall import RecallGrid, Tally, recall_grid
from gateway.sampling.report.boundary import (
    Boundary,
    Degradation,
    LengthBoundary,
    find_degradations,
    length_boundary,
)
from gateway.sampling.signals import Signal
from gateway.tokens.buckets import Bucket, bucket_index, buckets_for


@dataclass(frozen=True, slots=True)
class WorstCell:
    """The slowest decile of a bucket (latency at or above its p90) and how poor its answers were."""

    count: int
    latency_from: float
    logprob_mean_p10: float | None
    logprob_min_p10: float | None
    output_tokens_p10: float | None


@dataclass(frozen=True, slots=True)
class BucketStats:
    bucket: Bucket
    """By the tokens the model received (forwarded, else the prompt's)."""
    count: int
    enough_samples: bool = False
    """``count`` reaches ``boundary.min_count``: the bucket's signals can be compared (and trusted)."""
    probe_samples: int = 0
    received_tokens: Spread | None = None
    """The prompt tokens the gateway received, before any compression."""
    received_mean: float | None = None
    actions: dict[str, int] = field(default_factory=dict)
    """Counts by action (``forward``, ``compress``, ``retrieve``, …), the most common first."""
    latency: Spread | None = None
    """The main call's (``Signal.latency``)."""
    side_seconds: Spread | None = None
    """Among the requests that made side calls (summary, embeddings): their time, apart from latency."""
    ttft: Spread | None = None
    ttft_per_1k: Spread | None = None
    """Seconds to the first token per 1,000 tokens the model received (forwarded, else prompt)."""
    output_tokens: Spread | None = None
    tokens_per_second: Spread | None = None
    """Of the answers of at least ``boundary.min_answer_tokens``: a short one's rate is its call's overhead
    (and grows with the prompt's processing), not how fast the model writes."""
    logprob_mean: Spread | None = None
    finish_reasons: dict[str, int] = field(default_factory=dict)
    """Counts among the answered requests; ``none`` when the upstream gave no finish reason."""
    errors: int = 0
    answered: int = 0
    length_or_empty: int = 0
    """Answered requests cut by ``max_tokens`` (finish ``length``) or with no output tokens."""
    worst: WorstCell | None = None
    probes: Tally = field(default_factory=Tally)

    @property
    def error_rate(self) -> float | None:
        return self.errors / self.count if self.count else None

    @property
    def length_or_empty_share(self) -> float | None:
        return self.length_or_empty / self.answered if self.answered else None


@dataclass(frozen=True, slots=True)
class BehaviourReport:
    model: str
    since: float
    until: float
    buckets: tuple[BucketStats, ...]
    """Every configured bucket, empty or not, and the overflow bucket when it has data."""
    unknown_length: int
    """Samples without a prompt size (they are in no bucket)."""
    degradations: tuple[Degradation, ...]
    boundary: Boundary | None
    recall: RecallGrid
    oldest: float | None = None
    """Arrival time of the oldest sample read: a capped stream may hold less than the window asked for."""
    probe_boundary: LengthBoundary | None = None
    """The first probed length whose recall fell (probes are scored by their asked length too)."""
    boundary_config: BoundaryConfig = field(default_factory=BoundaryConfig)
    """The settings the boundary was found with (the HTML report shades by the same factor)."""

    @property
    def samples(self) -> int:
        return sum(stats.count for stats in self.buckets) + self.unknown_length


def build_report(
    signals: Sequence[Signal],
    probes: Sequence[ProbeResult] = (),
    *,
    model: str,
    since: float,
    until: float,
    config: SamplingConfig | None = None,
) -> BehaviourReport:
    config = config or SamplingConfig()
    edges = config.buckets
    buckets = buckets_for(edges)
    grouped: list[list[Signal]] = [[] for _ in buckets]
    unknown = 0
    for signal in signals:
        tokens = signal.context_tokens
        if tokens is None:
            unknown += 1
        else:
            grouped[bucket_index(tokens, edges)].append(signal)
    probe_tallies = [Tally() for _ in buckets]
    for result in probes:
        if not result.answered:
            continue
        index = bucket_index(result.prompt_tokens, edges)
        probe_tallies[index] = probe_tallies[index].add(result.recalled)
    stats = tuple(
        bucket_stats(bucket, grouped[bucket.index], probe_tallies[bucket.index], boundary=config.boundary)
        for bucket in buckets
        if bucket.high is not None or grouped[bucket.index] or probe_tallies[bucket.index].total
    )
    degradations = find_degradations(stats, config.boundary)
    grid = recall_grid(probes)
    return BehaviourReport(
        model=model,
        since=since,
        until=until,
        buckets=stats,
        unknown_length=unknown,
        degradations=degradations,
        boundary=Boundary.first(degradations),
        recall=grid,
        oldest=min((signal.time for signal in signals), default=None),
        probe_boundary=length_boundary(grid, config.boundary),
        boundary_config=config.boundary,
    )


def bucket_stats(
    bucket: Bucket,
    signals: Sequence[Signal],
    probes: Tally | None = None,
    *,
    boundary: BoundaryConfig | None = None,
) -> BucketStats:
    """``boundary``: the samples a bucket needs to be compared (``min_count``) and the answers long enough
    to give a speed (``min_answer_tokens``); default ``BoundaryConfig()``."""
    boundary = boundary or BoundaryConfig()
    needed = boundary.min_count
    probes = probes if probes is not None else Tally()
    if not signals:
        return BucketStats(bucket=bucket, count=0, probes=probes)
    answered = [signal for signal in signals if not signal.failed]
    finishes = Counter(signal.finish_reason or "none" for signal in answered)
    received = [float(signal.prompt_tokens) for signal in signals if signal.prompt_tokens is not None]
    return BucketStats(
        bucket=bucket,
        count=len(signals),
        enough_samples=len(signals) >= needed,
        probe_samples=sum(1 for signal in signals if signal.probe),
        received_tokens=spread(received),
        received_mean=sum(received) / len(received) if received else None,
        actions=dict(Counter(signal.action for signal in signals).most_common()),
        latency=spread(signal.latency for signal in signals),
        side_seconds=spread(signal.side_seconds for signal in signals),
        ttft=spread(signal.ttft for signal in signals),
        ttft_per_1k=spread(_per_1k(signal) for signal in signals),
        output_tokens=spread(_float(signal.output_tokens) for signal in answered),
        tokens_per_second=spread(
            signal.tokens_per_second
            for signal in answered
            if (signal.output_tokens or 0) >= boundary.min_answer_tokens
        ),
        logprob_mean=spread(signal.logprob_mean for signal in answered),
        finish_reasons=dict(finishes.most_common()),
        errors=len(signals) - len(answered),
        answered=len(answered),
        length_or_empty=sum(1 for signal in answered if _length_or_empty(signal)),
        worst=worst_cell(signals),
        probes=probes,
    )


def worst_cell(signals: Sequence[Signal]) -> WorstCell | None:
    """p10 of logprob and output tokens among the requests whose latency is at or above the p90."""
    timed = sorted((signal for signal in signals if signal.latency is not None), key=_latency)
    if not timed:
        return None
    threshold = percentile([_latency(signal) for signal in timed], 90)
    slowest = [signal for signal in timed if _latency(signal) >= threshold]
    return WorstCell(
        count=len(slowest),
        latency_from=threshold,
        logprob_mean_p10=_p10(signal.logprob_mean for signal in slowest),
        logprob_min_p10=_p10(signal.logprob_min for signal in slowest),
        output_tokens_p10=_p10(_float(signal.output_tokens) for signal in slowest if not signal.failed),
    )


def _p10(values: Iterable[float | None]) -> float | None:
    found = spread(values)
    return found.p10 if found is not None else None


def _latency(signal: Signal) -> float:
    return signal.latency if signal.latency is not None else 0.0


def _per_1k(signal: Signal) -> float | None:
    tokens = signal.context_tokens
    if signal.ttft is None or not tokens:
        return None
    return signal.ttft * 1000 / tokens


def _float(value: int | None) -> float | None:
    return float(value) if value is not None else None


def _length_or_empty(signal: Signal) -> bool:
    return signal.finish_reason == "length" or signal.output_tokens == 0
