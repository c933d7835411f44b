from __future__ import annotations

from dataclasses import replace

import pytest

from gateway.config.schema.sampling import BoundaryConfig, SamplingConfig
from gateway.sampling.report.boundary import worse_rate
from gateway.sampling.report.report import build_report
from tests.gateway.test_sampling_factories import NOW, make_probe, make_signal, planted_signals


def report_of(signals: list, probes: list | None = None, **config: object):  # type: ignore[no-untyped-def]
    return build_report(
        signals, probes or [], model="gpt-5.4", since=NOW - 3600, until=NOW, config=SamplingConfig(**config)
    )


@pytest.mark.parametrize(
    ("cliff_at", "label"), [(32_000, "32K-128K"), (128_000, "128K-250K"), (250_000, "250K-272K")]
)
def test_boundary_found_at_a_planted_ttft_cliff(cliff_at: int, label: str) -> None:
    report = report_of(planted_signals(cliff_at=cliff_at, per_bucket=60, ttft_factor=3.0, overhead=0.02))
    assert report.boundary is not None
    assert report.boundary.bucket.label == label
    assert report.boundary.signals == ("ttft_per_1k",)
    found = report.boundary.degradations[0]
    assert found.ratio > 1.5
    assert found.previous.index == found.bucket.index - 1


def test_boundary_none_without_a_cliff() -> None:
    report = report_of(planted_signals(cliff_at=10**9, per_bucket=60))
    assert report.boundary is None
    assert report.degradations == ()


def test_boundary_names_the_error_rate_when_errors_jump() -> None:
    report = report_of(
        planted_signals(cliff_at=128_000, per_bucket=80, ttft_factor=1.0, error_rate_after=0.3)
    )
    assert report.boundary is not None
    assert report.boundary.bucket.label == "128K-250K"
    assert report.boundary.signals == ("error_rate",)
    assert "error rate" in report.boundary.degradations[0].describe()


def test_boundary_needs_min_count_in_both_buckets() -> None:
    signals = planted_signals(cliff_at=128_000, per_bucket=60, ttft_factor=3.0)
    thin = [s for s in signals if not (s.prompt_tokens and 128_000 <= s.prompt_tokens < 250_000)][:]
    thin += [s for s in signals if s.prompt_tokens and 128_000 <= s.prompt_tokens < 250_000][:5]
    report = report_of(thin, boundary=BoundaryConfig(min_count=20))
    assert report.boundary is not None
    # the thin bucket is skipped: the cliff shows at the next bucket, compared with 32K-128K
    assert report.boundary.bucket.label == "250K-272K"
    assert report.boundary.degradations[0].previous.label == "32K-128K"


def test_boundary_factor_is_configurable() -> None:
    signals = planted_signals(cliff_at=128_000, per_bucket=60, ttft_factor=2.5, overhead=0.02)
    assert report_of(signals, boundary=BoundaryConfig(factor=1.5)).boundary is not None
    assert report_of(signals, boundary=BoundaryConfig(factor=4.0)).boundary is None


def test_boundary_ignores_a_small_rate_rise_from_zero() -> None:
    signals = planted_signals(cliff_at=10**9, per_bucket=100)
    in_bucket = [i for i, s in enumerate(signals) if s.prompt_tokens and 32_000 <= s.prompt_tokens < 128_000]
    index = in_bucket[0]
    signals[index] = replace(signals[index], status=502, error_type="upstream_unavailable")  # 1% errors
    assert report_of(signals).boundary is None


def test_boundary_from_length_finishes() -> None:
    signals = planted_signals(cliff_at=10**9, per_bucket=60)
    cut = [
        replace(s, finish_reason="length")
        if s.prompt_tokens and s.prompt_tokens >= 250_000 and n % 3 == 0
        else s
        for n, s in enumerate(signals)
    ]
    report = report_of(cut)
    assert report.boundary is not None
    assert report.boundary.bucket.label == "250K-272K"
    assert report.boundary.signals == ("length_or_empty",)


def test_boundary_from_probe_recall() -> None:
    signals = planted_signals(cliff_at=10**9, per_bucket=30)
    probes = [
        make_probe(length=length, repeat=n, prompt_tokens=length, recalled=length < 100_000 or n == 0)
        for length in (20_000, 60_000, 200_000)
        for n in range(4)
    ]
    report = report_of(signals, probes)
    assert report.boundary is not None
    assert report.boundary.bucket.label == "128K-250K"
    assert report.boundary.signals == ("probe_recall",)
    assert report.buckets[3].probes.recall == pytest.approx(0.25)


def test_failed_probes_are_not_misses() -> None:
    probes = [
        make_probe(length=length, repeat=n, prompt_tokens=length, recalled=True)
        if length < 100_000
        else make_probe(
            length=length, repeat=n, prompt_tokens=length, recalled=False, status=400, error="HTTP 400"
        )
        for length in (20_000, 60_000, 200_000)
        for n in range(4)
    ]
    report = report_of([], probes)
    assert report.boundary is None
    assert report.buckets[3].probes.total == 0


def test_boundary_from_logprob_drop() -> None:
    signals = [
        make_signal(prompt_tokens=tokens, logprob_mean=-0.2 if tokens < 128_000 else -0.9, request_id=str(n))
        for n, tokens in enumerate([4_000] * 30 + [60_000] * 30 + [200_000] * 30)
    ]
    report = report_of(signals)
    assert report.boundary is not None
    assert report.boundary.bucket.label == "128K-250K"
    assert "logprob_mean" in report.boundary.signals


@pytest.mark.parametrize(
    ("before", "after", "flagged"),
    [(0.0, 0.005, False), (0.0, 0.1, True), (0.3, 0.36, False), (0.1, 0.4, True), (0.2, 0.1, False)],
)
def test_worse_rate_floor_and_minimum_rise(before: float, after: float, flagged: bool) -> None:
    assert (worse_rate(before, after, BoundaryConfig()) is not None) is flagged


def test_report_overflow_bucket_shown_only_with_data() -> None:
    assert [stats.bucket.label for stats in report_of([make_signal()]).buckets][-1] == "272K-1M"
    huge = report_of([make_signal(prompt_tokens=1_200_000)])
    assert huge.buckets[-1].bucket.label == "1M+" and huge.buckets[-1].count == 1


def test_report_counts_samples_without_a_prompt_size_apart() -> None:
    report = report_of([make_signal(prompt_tokens=None, forwarded_tokens=None), make_signal()])
    assert report.unknown_length == 1
    assert report.samples == 2
    assert sum(stats.count for stats in report.buckets) == 1
