"""The experiment report as aligned terminal text: distributions side by side, agreement, cost, verdicts.

Each bucket takes two lines, the primary above the candidate; every spread carries the count behind it
(``p10 / p50 / p90 (n)``) and a bucket with fewer than ``min_samples`` pairs is marked ``(few)``: shown,
not compared.
"""

from __future__ import annotations

from collections.abc import Sequence

from gateway.experiments.report.comparison import SideStats
from gateway.experiments.report.figures import dollars, plain, share
from gateway.experiments.report.records import Arm
from gateway.experiments.report.report import BucketReport, ExperimentReport
from gateway.ledger.period import iso_time
from gateway.sampling.percentiles import Spread

FEW = " (few)"
SIDES_HEADER = (
    "bucket", "n", "side", "latency ms", "ttft ms", "output tok", "cost/request", "errors",
    "finish reasons", "actions",
)  # fmt: skip
AGREEMENT_HEADER = ("bucket", "scored", "score", "same tool", "same args", "methods", "judge")
COST_HEADER = (
    "bucket", "matching", "matching cost", "sampled primary", "sampled candidate", "ratio", "a month", "note",
)  # fmt: skip


def render_report(report: ExperimentReport) -> str:
    shadow = report.mode == "shadow"
    counted = f"{report.pairs:,} {'pairs' if shadow else 'requests'}"
    lines = [
        _title(report),
        f"{counted}, {iso_time(report.since_ms)} to {iso_time(report.until_ms)}; traffic counted from"
        f" {iso_time(report.traffic_since_ms)} (whole UTC days)"
        + (f"; oldest pair {iso_time(report.oldest_ms)}" if report.oldest_ms is not None else "")
        + (f"; {report.unreadable:,} unreadable" if report.unreadable else "")
        + (f"; {report.other_mode:,} of the other mode left out" if report.other_mode else ""),
        _spend(report),
        report.headline(),
        *([note] if (note := report.shed_note()) else []),
        "",
        "distributions (p10 / p50 / p90), each with its count in brackets; latency, ttft and output over the"
        " calls that answered, cost over every call",
        _table(SIDES_HEADER, [row for item in report.buckets for row in _side_rows(item, report, shadow)]),
    ]
    if shadow:
        lines += [
            "agreement",
            _table(AGREEMENT_HEADER, [_agreement_row(item, report) for item in report.buckets]),
        ]
    lines += ["cost", _table(COST_HEADER, [_cost_row(item, report) for item in report.buckets])]
    if any(item.comparison.pairs and not item.verdict.enough for item in report.buckets):
        lines.append(f"(few): fewer than {report.min_samples} pairs: shown, not compared")
    worst = [
        [item.bucket.label, found.request_id, f"{found.score:.2f}", found.kind]
        for item in report.buckets
        for found in (item.comparison.agreement.worst if item.comparison.agreement is not None else ())
    ]
    if worst:
        lines += ["", "least agreement", _table(("bucket", "request id", "score", "kind"), worst)]
    lines += ["verdict", *(f"  {item.verdict.text}" for item in report.buckets)]
    lines += [f"  {line}" for line in report.verdict]
    return "\n".join(lines).rstrip() + "\n"


def _title(report: ExperimentReport) -> str:
    config = report.config
    if config is None:
        return f"experiment {report.name}: {report.mode}, not configured (its data alone)"
    state = "enabled" if config.enabled else "disabled"
    return (
        f"experiment {report.name}: {report.mode}, {', '.join(config.primary)} against {config.candidate},"
        f" sample rate {config.sample_rate:g}, {state}"
    )


def _spend(report: ExperimentReport) -> str:
    budget = report.budget_nanos
    spent = f"spent today {dollars(report.spent_today_nanos)}"
    if budget:
        spent += f" ({share(report.spent_today_nanos / budget)} of {dollars(budget)} a day)"
    counters = ", ".join(
        f"{name.replace('_', ' ')} {count:,}" for name, count in report.mode_counters().items()
    )
    matching = f"matching requests {report.matching:,} ({dollars(report.matching_cost_nanos)})"
    return f"{spent}; {counters}; {matching}"


def _side_rows(item: BucketReport, report: ExperimentReport, shadow: bool) -> list[list[str]]:
    if not item.comparison.pairs:
        return [[item.bucket.label, "0", *("-" for _ in SIDES_HEADER[2:])]]
    rows = []
    for arm in ("primary", "candidate"):
        side = _side(item, arm)
        label, count = (item.bucket.label, _count(item)) if arm == "primary" else ("", "")
        if not shadow:
            count = f"{side.count:,}"
        rows.append([
            label, count, arm if shadow else f"{arm} arm", _spread(side.latency_ms), _spread(side.ttft_ms),
            _spread(side.output_tokens), _money(side.cost_nanos), _errors(side), _mix(side.finish_reasons),
            _mix(side.actions),
        ])  # fmt: skip
    return rows


def _agreement_row(item: BucketReport, report: ExperimentReport) -> list[str]:
    found = item.comparison.agreement
    if found is None or not found.count:
        return [item.bucket.label, "0", "-", "-", "-", "-", _spread(found.judge if found else None)]
    tools = found.tool_pairs
    return [
        item.bucket.label + ("" if item.verdict.enough else FEW),
        f"{found.count:,}",
        _spread(found.score, digits=2),
        f"{share(found.same_tool_share)} ({found.same_tool}/{tools})" if tools else "-",
        f"{share(found.same_args_share)} ({found.same_args}/{tools})" if tools else "-",
        _mix(found.methods),
        _spread(found.judge, digits=2),
    ]


def _cost_row(item: BucketReport, report: ExperimentReport) -> list[str]:
    found = item.projection
    primary, candidate = item.comparison.primary, item.comparison.candidate
    monthly = found.monthly_difference_nanos
    return [
        item.bucket.label,
        f"{found.matching:,}",
        dollars(found.matching_cost_nanos),
        dollars(primary.cost_total_nanos) if primary.count else "-",
        dollars(candidate.cost_total_nanos) if candidate.count else "-",
        f"{float(found.ratio):.2f}x ({found.basis})" if found.ratio is not None else "-",
        dollars(monthly) if monthly is not None else "-",
        found.note or "",
    ]


def _side(item: BucketReport, arm: Arm) -> SideStats:
    return item.comparison.primary if arm == "primary" else item.comparison.candidate


def _count(item: BucketReport) -> str:
    few = item.comparison.pairs and not item.verdict.enough
    return f"{item.comparison.pairs:,}" + (FEW if few else "")


def _spread(found: Spread | None, *, digits: int | None = None) -> str:
    if found is None:
        return "-"
    values = (found.p10, found.p50, found.p90)
    numbers = " / ".join(f"{value:.{digits}f}" if digits is not None else plain(value) for value in values)
    return f"{numbers} ({found.count})"


def _money(found: Spread | None) -> str:
    if found is None:
        return "-"
    return " / ".join(dollars(value) for value in (found.p10, found.p50, found.p90)) + f" ({found.count})"


def _errors(side: SideStats) -> str:
    if not side.count:
        return "-"
    return f"{share(side.error_rate, 1)} ({side.failed}/{side.count})"


def _mix(counts: dict[str, int]) -> str:
    return ", ".join(f"{name} {count}" for name, count in list(counts.items())[:3]) or "-"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(cell) for cell in column) for column in zip(header, *rows, strict=True)]

    def render(cells: Sequence[str]) -> str:
        first = cells[0].ljust(widths[0])
        rest = (cell.rjust(width) for cell, width in zip(cells[1:], widths[1:], strict=True))
        return "  ".join([first, *rest]).rstrip()

    rule = "  ".join("-" * width for width in widths)
    return "\n".join([render(header), rule, *(render(row) for row in rows)]) + "\n"
