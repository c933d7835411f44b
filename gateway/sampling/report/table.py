"""The behaviour report as aligned terminal text: distributions, quality, boundary, probe recall.

Every cell carries the count behind it (``p10 / p50 / p90 (n)``, ``2.5% (1/40)``), and a bucket with
fewer than ``boundary.min_count`` samples is marked ``(few)``: it is shown, but the boundary does not
compare it, and neither should the reader.
"""

from __future__ import annotations

from collections.abc import Sequence

from gateway.sampling.percentiles import Spread
from gateway.sampling.probes.recall import RecallGrid
from gateway.sampling.report.document import iso
from gateway.sampling.report.report import BehaviourReport, BucketStats
from gateway.sampling.report.verdict import coverage, recall_verdict
from gateway.tokens.buckets import size_label, tokens_label

DISTRIBUTION_HEADER = (
    "bucket", "n", "received mean, p50", "latency s", "ttft s", "ttft ms/1K in", "output tok", "tok/s",
    "side calls s",
)  # fmt: skip
QUALITY_HEADER = (
    "bucket", "n", "actions", "errors", "length|empty", "finish reasons", "probe recall", "slowest 10%: n",
    ">= latency s", "logprob p10", "output tok p10",
)  # fmt: skip
FEW = " (few)"


def render_report(report: BehaviourReport) -> str:
    lines = [
        f"{report.model}: {report.samples:,} samples, {iso(report.since)} to {iso(report.until)}"
        + (f" ({report.unknown_length:,} without a prompt size)" if report.unknown_length else "")
        + (f"; oldest sample {iso(report.oldest)}" if report.oldest is not None else ""),
        "buckets by the tokens the model received; received: the prompt as the client sent it; latency: the"
        " main call, side calls (summary, embeddings) apart",
        "",
        "distributions (p10 / p50 / p90), each with its count in brackets",
        _table(DISTRIBUTION_HEADER, [_distribution_row(stats) for stats in report.buckets]),
        "quality",
        _table(QUALITY_HEADER, [_quality_row(stats) for stats in report.buckets]),
    ]
    if any(stats.count and not stats.enough_samples for stats in report.buckets):
        lines.append(
            f"(few): fewer than {report.boundary_config.min_count} samples (boundary.min_count): shown, "
            "not compared"
        )
    lines += _boundary_lines(report)
    if not report.recall.empty:
        lines += ["", "needle probe recall (length x depth)", render_recall(report.recall)]
        found = report.probe_boundary
        verdict = recall_verdict(report.recall, report.boundary_config)
        lines.append(f"probe boundary: {found.describe() if found else verdict.describe()}")
    return "\n".join(lines).rstrip() + "\n"


def _boundary_lines(report: BehaviourReport) -> list[str]:
    boundary = report.boundary
    if boundary is None:
        lines = [f"boundary: {coverage(report.buckets, report.boundary_config).describe()}"]
    else:
        lines = [f"boundary: {boundary.bucket.label} ({', '.join(boundary.signals)})"]
        lines += [f"  {degradation.describe()}" for degradation in boundary.degradations]
    later = [found for found in report.degradations if boundary is None or found.bucket != boundary.bucket]
    return lines + [f"  also: {found.describe()}" for found in later]


def render_recall(grid: RecallGrid) -> str:
    header = ["length", *(f"depth {depth:g}" for depth in grid.depths), "all depths"]
    rows = [
        [
            tokens_label(length),
            *(str(grid.cell(length, depth)) for depth in grid.depths),
            str(grid.row(length)),
        ]
        for length in grid.lengths
    ]
    return _table(header, rows)


def _distribution_row(stats: BucketStats) -> list[str]:
    return [
        stats.bucket.label,
        _count(stats),
        _received(stats),
        _spread(stats.latency),
        _spread(stats.ttft),
        _spread(stats.ttft_per_1k, scale=1000),
        _spread(stats.output_tokens),
        _spread(stats.tokens_per_second),
        _spread(stats.side_seconds),
    ]


def _quality_row(stats: BucketStats) -> list[str]:
    worst = stats.worst
    return [
        stats.bucket.label,
        _count(stats),
        _mix(stats.actions),
        _share(stats.errors, stats.count),
        _share(stats.length_or_empty, stats.answered),
        _mix(stats.finish_reasons),
        str(stats.probes),
        str(worst.count) if worst else "-",
        _number(worst.latency_from) if worst else "-",
        _number(worst.logprob_mean_p10) if worst else "-",
        _number(worst.output_tokens_p10) if worst else "-",
    ]


def _count(stats: BucketStats) -> str:
    return f"{stats.count:,}" + (FEW if stats.count and not stats.enough_samples else "")


def _received(stats: BucketStats) -> str:
    if stats.received_tokens is None or stats.received_mean is None:
        return "-"
    return f"{size_label(stats.received_mean)}, {size_label(stats.received_tokens.p50)}"


def _mix(counts: dict[str, int]) -> str:
    return ", ".join(f"{name} {count}" for name, count in list(counts.items())[:3]) or "-"


def _spread(found: Spread | None, *, scale: float = 1) -> str:
    if found is None:
        return "-"
    numbers = " / ".join(_number(value * scale) for value in (found.p10, found.p50, found.p90))
    return f"{numbers} ({found.count})"


def _number(value: float | None) -> str:
    if value is None:
        return "-"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.3g}"


def _share(part: int, whole: int) -> str:
    return "-" if not whole else f"{part / whole:.1%} ({part}/{whole})"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(cell) for cell in column) for column in zip(header, *rows, strict=True)]

    def render(cells: Sequence[str]) -> str:
        first = cells[0].ljust(widths[0])
        rest = (cell.rjust(width) for cell, width in zip(cells[1:], widths[1:], strict=True))
        return "  ".join([first, *rest]).rstrip()

    rule = "  ".join("-" * width for width in widths)
    return "\n".join([render(header), rule, *(render(row) for row in rows)]) + "\n"
