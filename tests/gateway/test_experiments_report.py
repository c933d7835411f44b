from __future__ import annotations

from fractions import Fraction
from typing import Any

import orjson
import pytest

from gateway.config.schema.experiments import ExperimentConfig
from gateway.config.schema.sampling import DEFAULT_BUCKET_EDGES
from gateway.experiments.report.figures import change, dollars, times
from gateway.experiments.report.records import parse_pair
from gateway.experiments.report.report import BucketReport, ExperimentReport, build_report, report_document
from gateway.experiments.report.table import render_report
from tests.gateway.experiment_factories import (
    DAY_MS,
    NOW_MS,
    make_pair,
    make_side,
    planted_pairs,
    text_agreement,
    tool_agreement,
)

EDGES = (64_000, 128_000)
SINCE_MS = NOW_MS - 7 * DAY_MS
"""Seven days back from noon: the traffic counters' whole days begin at the midnight before, 7.5 days."""


def shadow_config(**overrides: Any) -> ExperimentConfig:
    values: dict[str, Any] = {
        "mode": "shadow", "primary": ["gpt-5.4"], "candidate": "gpt-5.4-mini", "sample_rate": 0.1,
        "budget_usd_per_day": "20",
    }  # fmt: skip
    values.update(overrides)
    return ExperimentConfig.model_validate(values)


def split_config() -> ExperimentConfig:
    return ExperimentConfig(mode="split", primary=("gpt-5.4",), candidate="gpt-5.4-mini", sample_rate=0.2)


def report_of(
    pairs: list[dict[str, Any]],
    traffic: dict[str, int] | None = None,
    *,
    config: ExperimentConfig | None = None,
    edges: tuple[int, ...] = EDGES,
    **options: Any,
) -> ExperimentReport:
    return build_report(
        "mini", config, pairs, traffic or {}, edges=edges, since_ms=SINCE_MS, until_ms=NOW_MS,
        spent_today_nanos=options.pop("spent_today_nanos", 0), **options,
    )  # fmt: skip


def bucket(report: ExperimentReport, label: str) -> BucketReport:
    return next(item for item in report.buckets if item.bucket.label == label)


def same_pairs(count: int, *, tokens: int, first: int = 0, **sides: Any) -> list[dict[str, Any]]:
    primary = sides.get("primary", make_side(cost_nanos=5_000_000))
    candidate = sides.get("candidate", make_side("gpt-5.4-mini", cost_nanos=1_000_000))
    return [make_pair(first + n, tokens=tokens, primary=primary, candidate=candidate) for n in range(count)]


def test_report_shows_the_planted_differences_in_their_bucket() -> None:
    report = report_of(
        planted_pairs(), config=shadow_config(match={"min_tokens": 8000}), edges=DEFAULT_BUCKET_EDGES
    )
    labels = [item.bucket.label for item in report.buckets]
    assert labels == ["8K-32K", "32K-128K", "128K-250K", "250K-272K", "272K-1M"]  # the match range, not 0-8K
    short, long = bucket(report, "8K-32K").comparison, bucket(report, "128K-250K").comparison
    assert short.pairs == long.pairs == 40
    assert short.primary.latency_ms is not None and short.candidate.latency_ms is not None
    assert short.candidate.latency_ms.p50 == short.primary.latency_ms.p50
    assert long.primary.latency_ms is not None and long.candidate.latency_ms is not None
    assert long.candidate.latency_ms.p50 == pytest.approx(3 * long.primary.latency_ms.p50)
    assert long.candidate.output_tokens is not None and long.primary.output_tokens is not None
    assert long.candidate.output_tokens.p50 / long.primary.output_tokens.p50 == pytest.approx(0.6, abs=0.01)
    assert short.agreement is not None and long.agreement is not None
    assert (short.agreement.same_tool_share, long.agreement.same_tool_share) == (1.0, 0.5)
    assert (short.agreement.same_args_share, long.agreement.same_args_share) == (1.0, 0.0)
    text = bucket(report, "128K-250K").verdict.text
    assert text.startswith("128K-250K: 40 pairs: candidate p50 latency 3.0x the primary's")
    assert "output p50 -40%" in text and "cost per request p50 -80%" in text
    assert "same tool 50% (10/20 tool pairs), same arguments 0% (0/20)" in text
    assert "latency 1.0x" in bucket(report, "8K-32K").verdict.text
    assert bucket(report, "32K-128K").verdict.text == "32K-128K: no pairs"


def test_report_says_a_thin_bucket_is_too_few_to_compare() -> None:
    pairs = same_pairs(40, tokens=30_000) + same_pairs(12, tokens=100_000, first=100)
    report = report_of(pairs, config=shadow_config())
    thin = bucket(report, "64K-128K")
    assert thin.verdict.text == "64K-128K: 12 pairs, too few to compare (30 needed)"
    assert not thin.verdict.enough and bucket(report, "0-64K").verdict.enough
    assert "too few to compare in 64K-128K (30 needed in each bucket)" in report.verdict
    assert report.verdict[0].startswith("overall (2 buckets pooled): 52 pairs: ")
    assert report_of(pairs, config=shadow_config(), min_samples=10).buckets[1].verdict.enough


def test_report_never_says_more_than_no_pairs_when_there_are_none() -> None:
    report = report_of([], {"n:0": 5, "cost:0": 50}, config=shadow_config())
    assert report.verdict[0] == "overall: no pairs in the window: nothing to compare yet"
    assert all("x the primary's" not in line for line in report.verdict)
    assert [item.verdict.text for item in report.buckets] == ["0-64K: no pairs", "64K-128K: no pairs"]


def test_report_puts_traffic_counters_in_the_bucket_holding_their_low() -> None:
    traffic = {"n:100000": 7, "cost:100000": 70, "n:8000": 3, "cost:8000": 30, "n:0": 1, "cost:0": 10,
               "n:x": 99, "cost:": 99, "shadowed": 4, "split_primary": 2, "mystery": 5}  # fmt: skip
    report = report_of([], traffic)
    assert [(item.bucket.label, item.projection.matching) for item in report.buckets] == [
        ("0-64K", 4), ("64K-128K", 7),
    ]  # fmt: skip
    assert bucket(report, "0-64K").projection.matching_cost_nanos == 40
    assert report.matching == 11 and report.matching_cost_nanos == 110
    assert report.counters == {"shadowed": 4, "shed": 0, "over_budget": 0, "failed": 0, "oversized": 0,
                               "excluded": 0, "split_candidate": 0, "split_primary": 2,
                               "split_full": 0, "shed_slots": 0, "shed_cpu": 0,
                               "shed_tasks": 0}  # fmt: skip


def test_report_projects_the_monthly_difference_exactly() -> None:
    """2 USD of matching primary traffic over 7.5 days; the candidate costs a fifth: -1.60 USD in the window,
    -6.40 USD a month (30 days)."""
    failed = make_side("gpt-5.4-mini", error="timeout", latency_ms=30_000, cost_nanos=0)
    pairs = same_pairs(40, tokens=10_000) + same_pairs(10, tokens=10_000, first=50, candidate=failed)
    report = report_of(pairs, {"n:0": 400, "cost:0": 2_000_000_000}, config=shadow_config())
    found = bucket(report, "0-64K").projection
    assert found.ratio == Fraction(1, 5) and found.basis == 40  # the failed calls do not flatter the ratio
    assert found.window_difference_nanos == -1_600_000_000
    assert found.monthly_difference_nanos == -6_400_000_000
    assert report.projection.monthly_difference_nanos == -6_400_000_000
    assert "projected difference for all matching traffic: -$6.40 a month, from 1 bucket" in report.verdict
    later = report_of(pairs, {"n:0": 400, "cost:0": 2_000_000_000}, traffic_since_ms=NOW_MS - DAY_MS // 2)
    assert later.buckets[0].projection.monthly_difference_nanos == -96_000_000_000  # 12 hours of counters


def test_report_bucket_without_pairs_projects_nothing_and_says_so() -> None:
    traffic = {"n:0": 400, "cost:0": 2_000_000_000, "n:64000": 50, "cost:64000": 12_340_000}
    report = report_of(same_pairs(40, tokens=10_000), traffic, config=shadow_config())
    empty = bucket(report, "64K-128K").projection
    assert empty.monthly_difference_nanos is None and empty.note == "no pairs: projects nothing"
    assert report.projection.projected == ("0-64K",) and report.projection.unprojected == ("64K-128K",)
    assert report.projection.monthly_difference_nanos == -6_400_000_000
    assert "64K-128K: matching traffic ($0.01 in the window) with nothing to project from" in report.verdict


@pytest.mark.parametrize(
    ("pairs", "note"),
    [
        (same_pairs(3, tokens=10, candidate=make_side(error="upstream_error", cost_nanos=0)),
         "no pair where both sides answered: projects nothing"),
        (same_pairs(3, tokens=10, primary=make_side(cost_nanos=0)),
         "the primary's sampled cost is zero: no cost ratio"),
    ],
)  # fmt: skip
def test_report_says_why_a_bucket_with_pairs_projects_nothing(pairs: list[dict[str, Any]], note: str) -> None:
    found = report_of(pairs, {"n:0": 10, "cost:0": 100}).buckets[0].projection
    assert found.note == note and found.monthly_difference_nanos is None


def test_report_counts_errors_apart_from_the_answered_distributions() -> None:
    timeout = make_side("gpt-5.4-mini", error="timeout", latency_ms=30_000, cost_nanos=100)
    pairs = same_pairs(30, tokens=10) + same_pairs(10, tokens=10, first=30, candidate=timeout)
    candidate = report_of(pairs).buckets[0].comparison.candidate
    assert (candidate.count, candidate.answered, candidate.errors) == (40, 30, {"timeout": 10})
    assert candidate.error_rate == 0.25
    assert (
        candidate.latency_ms is not None and candidate.latency_ms.p90 == 800.0
    )  # the timeouts are not latency
    assert candidate.cost_total_nanos == 30 * 1_000_000 + 10 * 100  # they are billed
    assert candidate.cost_nanos is not None and candidate.cost_nanos.count == 40
    assert "errors 25.0% vs 0.0%" in report_of(pairs).buckets[0].verdict.text


def test_report_says_too_few_answers_when_the_candidate_mostly_failed() -> None:
    timeout = make_side("gpt-5.4-mini", error="timeout", cost_nanos=0)
    pairs = same_pairs(10, tokens=10) + same_pairs(30, tokens=10, first=10, candidate=timeout)
    text = report_of(pairs).buckets[0].verdict.text
    assert "candidate answered 10 of 40: too few answers to compare latency and output" in text
    assert "latency 1.0x" not in text and "errors 75.0% vs 0.0%" in text


def test_report_uses_percentiles_never_averages() -> None:
    slow = make_side(latency_ms=10_000)
    pairs = same_pairs(9, tokens=10, primary=make_side(latency_ms=100)) + same_pairs(
        1, tokens=10, first=9, primary=slow
    )
    latency = report_of(pairs).buckets[0].comparison.primary.latency_ms
    assert latency is not None and latency.p50 == 100.0  # the mean would be 1,090
    assert latency.p90 == pytest.approx(100 + 0.1 * 9_900)


def test_report_agreement_worst_examples_methods_and_judge() -> None:
    pairs = []
    for n, score in enumerate([0.9, 0.2, 0.8, 0.1, 0.7, 0.3, 0.95, 0.05]):
        pairs.append(make_pair(n, tokens=10, primary=make_side(), candidate=make_side("m"),
                               agreement=text_agreement(score, "embedding" if n % 2 else "overlap"),
                               judge={"score": score, "model": "gpt-5.2"}))  # fmt: skip
    sides = {"primary": make_side(), "candidate": make_side("m")}
    pairs += [
        make_pair(20, tokens=10, **sides, agreement=tool_agreement(True, True)),
        make_pair(21, tokens=10, **sides, agreement=tool_agreement(True, False)),
        make_pair(22, tokens=10, **sides, agreement=tool_agreement(False, False)),
        make_pair(23, tokens=10, **sides),
    ]
    agreement = report_of(pairs).buckets[0].comparison.agreement
    assert agreement is not None
    assert [found.request_id for found in agreement.worst] == [
        "req_000022", "req_000007", "req_000003", "req_000001", "req_000005",
    ]  # fmt: skip
    assert agreement.worst[0].score == 0.0 and agreement.worst[1].judge == 0.05
    assert agreement.count == 11 and agreement.tool_pairs == 3
    assert (agreement.same_tool, agreement.same_args) == (2, 1)
    assert agreement.methods == {"overlap": 4, "embedding": 4, "tool": 3}
    assert agreement.judge is not None and agreement.judge.count == 8
    assert agreement.judge.p50 == pytest.approx(0.5)


def test_report_of_a_split_compares_the_arms() -> None:
    primary = make_side(cost_nanos=4_000_000)
    primary_arm = [make_pair(n, tokens=10, mode="split", arm="primary", primary=primary) for n in range(40)]
    candidate_arm = [
        make_pair(100 + n, tokens=10, mode="split", arm="candidate",
                  candidate=make_side("gpt-5.4-mini", latency_ms=400, cost_nanos=1_000_000))
        for n in range(12)
    ]  # fmt: skip
    traffic = {"n:0": 100, "cost:0": 400_000_000, "split_candidate": 12, "split_primary": 40}
    report = report_of(primary_arm + candidate_arm, traffic, config=split_config())
    item = report.buckets[0]
    assert report.mode == "split" and item.comparison.agreement is None
    assert (item.comparison.primary.count, item.comparison.candidate.count) == (40, 12)
    assert item.verdict.text == (
        "0-64K: 12 candidate-arm and 40 primary-arm requests, too few to compare (30 needed in each arm)"
    )
    assert item.projection.ratio == Fraction(1, 4)
    more = candidate_arm + [
        make_pair(200 + n, tokens=10, mode="split", arm="candidate",
                  candidate=make_side("gpt-5.4-mini", latency_ms=400, cost_nanos=1_000_000))
        for n in range(20)
    ]  # fmt: skip
    compared = report_of(primary_arm + more, traffic, config=split_config()).buckets[0].verdict.text
    assert compared.startswith(
        "0-64K: 32 candidate-arm and 40 primary-arm requests: candidate p50 latency 0.50x"
    )
    assert "the primary arm's" in compared and "same tool" not in compared
    assert report_document(report)["buckets"][0]["agreement"] is None


def test_report_leaves_out_unreadable_pairs_and_the_other_mode() -> None:
    pairs = [
        *same_pairs(3, tokens=10),
        {"v": 2, "id": "req_new", "mode": "shadow", "tokens": 1},
        {"v": 1, "id": "req_bad", "mode": "shadow", "tokens": "many"},
        make_pair(50, tokens=10, mode="split", arm="candidate", candidate=make_side("m")),
    ]
    report = report_of(pairs, config=shadow_config())
    assert (report.pairs, report.unreadable, report.other_mode) == (3, 2, 1)


def test_report_without_config_takes_the_mode_and_models_from_the_data() -> None:
    pairs = [make_pair(n, tokens=100_000, mode="split", arm="candidate", candidate=make_side("gpt-5.4-mini"))
             for n in range(3)]  # fmt: skip
    report = report_of(pairs)
    assert report.mode == "split" and [item.bucket.label for item in report.buckets] == ["64K-128K"]
    document = report_document(report)
    assert document["configured"] is False and document["candidate"] == "gpt-5.4-mini"
    assert document["budget"]["usd_per_day"] is None and document["sample_rate"] is None


def test_report_document_is_json_with_money_as_decimal_strings() -> None:
    traffic = {"n:0": 400, "cost:0": 2_000_000_000, "shadowed": 40, "shed": 2, "over_budget": 1}
    report = report_of(
        same_pairs(40, tokens=10), traffic, config=shadow_config(), spent_today_nanos=3_210_000_000
    )
    document = orjson.loads(orjson.dumps(report_document(report)))
    assert document["object"] == "gateway.experiment_report" and document["mode"] == "shadow"
    assert document["budget"] == {"usd_per_day": "20.00", "spent_today_usd": "3.210000000",
                                  "remaining_today_usd": "16.790000000"}  # fmt: skip
    assert document["counters"]["shed"] == 2 and document["counters"]["over_budget"] == 1
    first = document["buckets"][0]
    assert first["bucket"] == "0-64K" and first["enough_pairs"] is True and first["pairs"] == 40
    assert first["primary"]["cost_per_request_usd"] == {
        "count": 40,
        "p10": "0.005",
        "p50": "0.005",
        "p90": "0.005",
    }
    assert first["cost"]["monthly_difference_usd"] == "-6.400000000" and first["cost"]["ratio"] == 0.2
    assert set(first["primary"]["latency_ms"]) == {"count", "p10", "p50", "p90"}
    assert document["overall"]["monthly_difference_usd"] == "-6.400000000"
    assert (
        document["since"] == "2025-11-24T12:00:00.000Z"
        and document["traffic_since"] == "2025-11-24T00:00:00.000Z"
    )


def test_report_text_table_marks_thin_buckets_and_ends_with_the_verdicts() -> None:
    pairs = same_pairs(40, tokens=10) + same_pairs(3, tokens=100_000, first=100)
    text = render_report(report_of(pairs, {"n:0": 400, "cost:0": 2_000_000_000}, config=shadow_config()))
    lines = text.splitlines()
    assert lines[0] == "experiment mini: shadow, gpt-5.4 against gpt-5.4-mini, sample rate 0.1, enabled"
    assert any(line.startswith("64K-128K") and "3 (few)" in line for line in lines)
    rows = [line for line in lines if line.startswith("0-64K") and "primary" in line]
    assert len(rows) == 1 and "(40)" in rows[0]
    assert "  64K-128K: 3 pairs, too few to compare (30 needed)" in lines
    assert lines[-1].startswith("  projected difference for all matching traffic: -$6.40 a month")


@pytest.mark.parametrize(
    "data",
    [
        {"v": 1, "mode": "shadow", "tokens": 5},  # no id
        {"v": 1, "id": "r", "mode": "mirror", "tokens": 5},
        {"v": 1, "id": "r", "mode": "shadow", "tokens": -1},
        {"v": 1, "id": "r", "mode": "shadow", "tokens": True},
        {"v": 1, "id": "r", "mode": "split", "tokens": 5, "arm": "primary"},  # no side for its arm
        {"v": 1, "id": "r", "mode": "shadow", "tokens": 5, "primary": {"model": "m", "latency_ms": "fast"}},
        {"v": 1, "id": "r", "mode": "shadow", "tokens": 5, "agreement": {"kind": "text"}},  # no score
        {"v": 1, "id": "r", "mode": "shadow", "tokens": 5,
         "agreement": {"kind": "tool", "score": 1, "method": "tool", "same_tool": "yes"}},
    ],
)  # fmt: skip
def test_parse_pair_rejects_what_the_report_cannot_use(data: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        parse_pair(data)


def test_parse_pair_reads_the_layout() -> None:
    data = make_pair(3, tokens=183_000, primary=make_side(), candidate=make_side("m", error="timeout"),
                     agreement=tool_agreement(True, False), judge={"score": 0.4, "model": "j"})  # fmt: skip
    pair = parse_pair(data)
    assert pair.request_id == "req_000003" and pair.tokens == 183_000 and pair.arm is None
    assert pair.primary is not None and pair.primary.answered and pair.primary.cost_nanos == 1_000_000
    assert pair.candidate is not None and pair.candidate.error == "timeout" and not pair.candidate.answered
    assert pair.agreement is not None and (pair.agreement.same_tool, pair.agreement.same_args) == (
        True,
        False,
    )
    assert pair.judge is not None and pair.judge.score == 0.4


@pytest.mark.parametrize(
    ("nanos", "expected"),
    [(0, "$0"), (2_000_000_000, "$2.00"), (-6_400_000_000, "-$6.40"), (1_234_567_890_123, "$1,234.57"),
     (1_000_000, "$0.001"), (1_234_567, "$0.001235"), (10_000_000, "$0.01"), (50, "$5.00e-8")],
)  # fmt: skip
def test_dollars_in_cents_from_a_cent_up(nanos: int, expected: str) -> None:
    assert dollars(nanos) == expected


def test_times_and_change() -> None:
    assert (times(2.1), times(0.625), times(12.4)) == ("2.1x", "0.62x", "12x")
    assert (change(62, 100), change(112, 100), change(1, 0)) == ("-38%", "+12%", None)
