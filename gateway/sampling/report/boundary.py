"""The effective-context boundary: the first bucket where a signal degrades against the previous bucket.

Each signal is compared with the nearest shorter bucket that has enough data for it (``min_count``
samples, ``min_probe_count`` probe results; tokens per second: of answers of ``min_answer_tokens`` or
more, and no faster than ``max_tokens_per_second``, above which nothing is measured but delivery). A level
(time to first token per 1K input tokens, tokens per second, mean logprob) degrades when it is worse by
more than ``factor`` (``cur / prev`` for a cost, ``prev / cur`` for a speed, the ratio of magnitudes for a
logprob). A rate (errors, ``length`` or empty finishes, probe misses) degrades when
``(cur + floor) / (prev + floor) > factor`` and it also rose by at least ``min_rate_increase``: without the
floor any rise from 0% would be infinitely worse.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from gateway.config.schema.sampling import BoundaryConfig
from gateway.sampling.percentiles import Spread
from gateway.sampling.probes.recall import RecallGrid, Tally
from gateway.tokens.buckets import Bucket, tokens_label


class BucketView(Protocol):
    """What the boundary reads of a bucket's statistics (``report.BucketStats`` has it)."""

    @property
    def bucket(self) -> Bucket: ...
    @property
    def count(self) -> int: ...
    @property
    def answered(self) -> int: ...
    @property
    def ttft_per_1k(self) -> Spread | None: ...
    @property
    def tokens_per_second(self) -> Spread | None: ...
    @property
    def logprob_mean(self) -> Spread | None: ...
    @property
    def error_rate(self) -> float | None: ...
    @property
    def length_or_empty_share(self) -> float | None: ...
    @property
    def probes(self) -> Tally: ...


Measure = Callable[[BucketView], tuple[float, int] | None]
"""A bucket's value of a signal and the number of observations behind it (None: no data)."""


@dataclass(frozen=True, slots=True)
class SignalRule:
    name: str
    label: str
    measure: Measure
    kind: Literal["level", "rate"]
    badness: Callable[[float], float]
    """Maps the value to a number that grows as things get worse (a rate: itself)."""
    probe: bool = False
    ceiling: Callable[[BoundaryConfig], float] | None = None
    """Above it a value measures something else (tokens per second of an answer delivered at once): the
    bucket is not compared on this signal."""


def _p50(pick: Callable[[BucketView], Spread | None]) -> Measure:
    def measure(view: BucketView) -> tuple[float, int] | None:
        found = pick(view)
        return (found.p50, found.count) if found is not None else None

    return measure


def _inverse(value: float) -> float:
    return 1 / value if value > 0 else math.inf


def _rate(value: Callable[[BucketView], float | None], count: Callable[[BucketView], int]) -> Measure:
    def measure(view: BucketView) -> tuple[float, int] | None:
        found = value(view)
        return (found, count(view)) if found is not None else None

    return measure


RULES: tuple[SignalRule, ...] = (
    SignalRule(
        "ttft_per_1k", "time to first token per 1K input tokens (p50)",
        _p50(lambda view: view.ttft_per_1k), "level", lambda value: value,
    ),
    SignalRule(
        "tokens_per_second", "output tokens per second (p50)",
        _p50(lambda view: view.tokens_per_second), "level", _inverse,
        ceiling=lambda config: config.max_tokens_per_second,
    ),
    SignalRule(
        "logprob_mean", "mean token logprob (p50)",
        _p50(lambda view: view.logprob_mean), "level", lambda value: -value,
    ),
    SignalRule(
        "error_rate", "error rate",
        _rate(lambda view: view.error_rate, lambda view: view.count), "rate", lambda value: value,
    ),
    SignalRule(
        "length_or_empty", "share of length or empty finishes",
        _rate(lambda view: view.length_or_empty_share, lambda view: view.answered), "rate",
        lambda value: value,
    ),
    SignalRule(
        "probe_recall", "needle probe recall",
        _rate(lambda view: view.probes.recall, lambda view: view.probes.total), "rate",
        lambda value: 1 - value, probe=True,
    ),
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Degradation:
    bucket: Bucket
    signal: str
    label: str
    previous: Bucket
    previous_value: float
    value: float
    ratio: float
    """How many times worse (rates: with the floor added on both sides)."""

    def describe(self) -> str:
        ratio = "∞" if math.isinf(self.ratio) else f"{self.ratio:.2f}x"
        return (
            f"{self.label} {_show(self.signal, self.previous_value)} at {self.previous.label} -> "
            f"{_show(self.signal, self.value)} at {self.bucket.label} ({ratio} worse)"
        )


@dataclass(frozen=True, slots=True)
class Boundary:
    """The first degraded bucket and every signal that degraded there."""

    bucket: Bucket
    degradations: tuple[Degradation, ...]

    @property
    def signals(self) -> tuple[str, ...]:
        return tuple(degradation.signal for degradation in self.degradations)

    @classmethod
    def first(cls, degradations: Sequence[Degradation]) -> Boundary | None:
        if not degradations:
            return None
        bucket = min((degradation.bucket for degradation in degradations), key=lambda bucket: bucket.index)
        return cls(bucket, tuple(found for found in degradations if found.bucket == bucket))


def find_degradations(
    views: Sequence[BucketView], config: BoundaryConfig, rules: Sequence[SignalRule] = RULES
) -> tuple[Degradation, ...]:
    """Every (bucket, signal) that degrades against the nearest shorter bucket with enough data."""
    found: list[Degradation] = []
    for rule in rules:
        needed = config.min_probe_count if rule.probe else config.min_count
        previous: tuple[BucketView, float] | None = None
        for view in views:
            measured = rule.measure(view)
            if measured is None or measured[1] < needed:
                continue
            value = measured[0]
            if rule.ceiling is not None and value > rule.ceiling(config):
                continue
            if previous is not None:
                ratio = _worse_by(rule, previous[1], value, config)
                if ratio is not None:
                    found.append(
                        Degradation(
                            view.bucket, rule.name, rule.label, previous[0].bucket, previous[1], value, ratio
                        )
                    )
            previous = (view, value)
    found.sort(key=lambda degradation: (degradation.bucket.index, -degradation.ratio))
    return tuple(found)


def _worse_by(rule: SignalRule, before: float, after: float, config: BoundaryConfig) -> float | None:
    """The ratio by which ``after`` is worse than ``before``, when that counts as a degradation."""
    bad_before, bad_after = rule.badness(before), rule.badness(after)
    if rule.kind == "rate":
        return worse_rate(bad_before, bad_after, config)
    if bad_before <= 0:
        ratio = math.inf if bad_after > 0 else 1.0
    else:
        ratio = bad_after / bad_before
    return ratio if ratio > config.factor else None


def worse_rate(before: float, after: float, config: BoundaryConfig) -> float | None:
    """The ratio by which the rate of a bad outcome rose from ``before`` to ``after``, when that counts as
    a degradation: above ``factor`` with the floor added to both, and up by ``min_rate_increase``."""
    floor = config.rate_floor
    ratio = (after + floor) / (before + floor) if before + floor > 0 else math.inf
    rose = after - before >= config.min_rate_increase
    return ratio if ratio > config.factor and rose else None


@dataclass(frozen=True, slots=True)
class LengthBoundary:
    """The first probed length whose recall fell against the previous one."""

    length: int
    previous: int
    recall: float
    previous_recall: float

    def describe(self) -> str:
        return (
            f"{tokens_label(self.length)} (recall {self.previous_recall:.0%} at "
            f"{tokens_label(self.previous)} -> {self.recall:.0%})"
        )


def length_boundary(grid: RecallGrid, config: BoundaryConfig) -> LengthBoundary | None:
    """The first length whose recall (all depths) fell against the previous length with enough probes,
    by the boundary's rate rule on the miss rate."""
    previous: tuple[int, float] | None = None
    for length in grid.lengths:
        tally = grid.row(length)
        recall = tally.recall
        if recall is None or tally.total < config.min_probe_count:
            continue
        if previous is not None and worse_rate(1 - previous[1], 1 - recall, config) is not None:
            return LengthBoundary(
                length=length, previous=previous[0], recall=recall, previous_recall=previous[1]
            )
        previous = (length, recall)
    return None


def _show(signal: str, value: float) -> str:
    if signal in {"error_rate", "length_or_empty", "probe_recall"}:
        return f"{value:.1%}"
    if signal == "ttft_per_1k":
        return f"{value * 1000:.1f} ms"
    return f"{value:.3g}"
