from __future__ import annotations

import random
import statistics

import pytest

from gateway.config.schema.sampling import DEFAULT_BUCKET_EDGES
from gateway.sampling.percentiles import percentile, spread
from gateway.sampling.report.report import bucket_stats, worst_cell
from gateway.tokens.buckets import Bucket, bucket_index, buckets_for, parse_tokens, tokens_label
from tests.gateway.test_sampling_factories import make_signal


@pytest.mark.parametrize(
    ("values", "q", "expected"),
    [
        (list(range(1, 101)), 10, 10.9),
        (list(range(1, 101)), 50, 50.5),
        (list(range(1, 101)), 90, 90.1),
        ([1, 2, 3, 4], 10, 1.3),
        ([1, 2, 3, 4], 50, 2.5),
        ([1, 2, 3, 4], 90, 3.7),
        ([5], 10, 5),
        ([5], 90, 5),
        ([0, 10], 0, 0),
        ([0, 10], 100, 10),
        ([0, 10], 25, 2.5),
    ],
)
def test_percentile_linear_interpolation_known_values(values: list[float], q: float, expected: float) -> None:
    assert percentile(values, q) == pytest.approx(expected)


def test_percentile_matches_statistics_quantiles_inclusive() -> None:
    rng = random.Random(3)
    for size in (2, 3, 10, 37, 1000):
        values = sorted(rng.lognormvariate(0, 1) for _ in range(size))
        deciles = statistics.quantiles(values, n=10, method="inclusive")
        assert percentile(values, 10) == pytest.approx(deciles[0])
        assert percentile(values, 50) == pytest.approx(deciles[4])
        assert percentile(values, 90) == pytest.approx(deciles[8])


def test_percentile_rejects_empty_and_out_of_range() -> None:
    with pytest.raises(ValueError):
        percentile([], 50)
    with pytest.raises(ValueError):
        percentile([1.0], 101)


def test_spread_ignores_missing_values_and_sorts() -> None:
    found = spread([30.0, None, 10.0, 20.0, None])
    assert found is not None
    assert (found.count, found.p10, found.p50, found.p90) == (3, 12.0, 20.0, 28.0)
    assert spread([None, None]) is None


def test_bucket_stats_percentiles_rates_and_finish_mix_of_a_known_set() -> None:
    bucket = Bucket(0, 0, 8000)
    signals = [
        make_signal(latency=float(n), output_tokens=n * 10, ttft=n / 100, prompt_tokens=1000)
        for n in range(1, 101)
    ]
    signals[0] = make_signal(latency=1.0, status=502, error_type="upstream_unavailable", finish_reason=None)
    signals[1] = make_signal(latency=2.0, output_tokens=20, finish_reason="length")
    signals[2] = make_signal(latency=3.0, output_tokens=0, finish_reason="stop")
    stats = bucket_stats(bucket, signals)
    assert stats.count == 100
    assert stats.latency is not None
    assert (stats.latency.p10, stats.latency.p50, stats.latency.p90) == pytest.approx((10.9, 50.5, 90.1))
    assert stats.errors == 1 and stats.error_rate == pytest.approx(0.01)
    assert stats.answered == 99
    assert stats.length_or_empty == 2
    assert stats.length_or_empty_share == pytest.approx(2 / 99)
    assert stats.finish_reasons == {"stop": 98, "length": 1}
    assert stats.ttft_per_1k is not None and stats.ttft_per_1k.count == 100


def test_bucket_stats_of_no_signals_is_empty() -> None:
    stats = bucket_stats(Bucket(1, 8000, 32000), [])
    assert stats.count == 0 and stats.latency is None and stats.error_rate is None and stats.worst is None


def test_worst_cell_is_the_p10_of_quality_in_the_slowest_decile() -> None:
    fast = [make_signal(latency=1.0 + n / 100, logprob_mean=-0.1, output_tokens=500) for n in range(90)]
    slow = [
        make_signal(
            latency=10.0 + n, logprob_mean=-1.0 - n / 10, logprob_min=-8.0, output_tokens=10 * (n + 1)
        )
        for n in range(10)
    ]
    cell = worst_cell(fast + slow)
    assert cell is not None
    assert cell.count == 10
    assert cell.latency_from == pytest.approx(percentile(sorted(s.latency or 0 for s in fast + slow), 90))
    assert cell.logprob_mean_p10 == pytest.approx(percentile(sorted(-1.0 - n / 10 for n in range(10)), 10))
    assert cell.output_tokens_p10 == pytest.approx(percentile([10.0 * (n + 1) for n in range(10)], 10))
    assert cell.logprob_min_p10 == pytest.approx(-8.0)


@pytest.mark.parametrize(
    ("tokens", "label"),
    [(0, "0-8K"), (7_999, "0-8K"), (8_000, "8K-32K"), (249_999, "128K-250K"), (250_000, "250K-272K"),
     (272_000, "272K-1M"), (999_999, "272K-1M"), (1_000_000, "1M+")],
)  # fmt: skip
def test_bucket_index_places_tokens_in_half_open_buckets(tokens: int, label: str) -> None:
    buckets = buckets_for(DEFAULT_BUCKET_EDGES)
    bucket = buckets[bucket_index(tokens, DEFAULT_BUCKET_EDGES)]
    assert bucket.label == label
    assert bucket.contains(tokens)


@pytest.mark.parametrize(
    ("text", "tokens"),
    [("8k", 8_000), ("256K", 256_000), ("1.5m", 1_500_000), ("1_000", 1_000), ("300", 300)],
)
def test_parse_tokens_and_labels(text: str, tokens: int) -> None:
    assert parse_tokens(text) == tokens
    assert parse_tokens(tokens_label(tokens).replace("+", "")) == tokens
