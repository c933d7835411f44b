"""The behaviour report as aligned terminal text: distributions, quality, boundary, probe recall."""

from __future__ import annotations

from collections.abc import Sequence

from gateway.sampling.buckets import tokens_label
from gateway.sampling.document import iso
from gateway.sampling.percentiles import Spread
from gateway.sampling.recall import RecallGrid
from gateway.sampling.report import BehaviourReport, BucketStats

QUALITY_HEADER = (
    "bucket", "errors", "length|empty", "finish reasons", "probe recall", "slowest 10%: n", ">= latency s",
    "logprob p10", "output tok p10",
)  # fmt: skip


def render_report(report: BehaviourReport) -> str:
    lines = [
        f"{report.model}: {report.samples:,} samples, {iso(report.since)} to {iso(report.until)}"
        + (f" ({report.unknown_length:,} without a prompt size)" if report.unknown_length else "")
        + (f"; oldest sample {iso(report.oldest)}" if report.oldest is not None else ""),
        "",
        "distributions (p10 / p50 / p90)",
        _table(
            ["bucket", "n", "latency s", "ttft s", "ttft ms/1K in", "output tok", "tok/s"],
            [_distribution_row(stats) for stats in report.buckets],
        ),
        "quality",
        _table(QUALITY_HEADER, [_quality_row(stats) for stats in report.buckets]),
    ]
    boundary = report.boundary
    if boundary is None:
        lines.append("boundary: none found (no signal degraded between buckets with enough samples)")
    else:
        lines.append(f"boundary: {boundary.bucket.label} ({', '.join(boundary.signals)})")
        lines.extend(f"  {degradation.describe()}" for degradation in boundary.degradations)
    later = [found for found in report.degradations if boundary is None or found.bucket != boundary.bucket]
    lines.extend(f"  also: {found.describe()}" for found in later)
    if not report.recall.empty:
        lines += ["", "needle probe recall (length x depth)", render_recall(report.recall)]
        found = report.probe_boundary
        lines.append(f"probe boundary: {found.describe()}" if found else "probe boundary: none found")
    return "\n".join(lines).rstrip() + "\n"


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
        f"{stats.count:,}",
        _spread(stats.latency),
        _spread(stats.ttft),
        _spread(stats.ttft_per_1k, scale=1000),
        _spread(stats.output_tokens),
        _spread(stats.tokens_per_second),
    ]


def _quality_row(stats: BucketStats) -> list[str]:
    worst = stats.worst
    mix = ", ".join(f"{reason} {count}" for reason, count in list(stats.finish_reasons.items())[:3])
    return [
        stats.bucket.label,
        _share(stats.error_rate),
        _share(stats.length_or_empty_share),
        mix or "-",
        str(stats.probes),
        str(worst.count) if worst else "-",
        _number(worst.latency_from) if worst else "-",
        _number(worst.logprob_mean_p10) if worst else "-",
        _number(worst.output_tokens_p10) if worst else "-",
    ]


def _spread(found: Spread | None, *, scale: float = 1) -> str:
    if found is None:
        return "-"
    return " / ".join(_number(value * scale) for value in (found.p10, found.p50, found.p90))


def _number(value: float | None) -> str:
    if value is None:
        return "-"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.3g}"


def _share(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(cell) for cell in column) for column in zip(header, *rows, strict=True)]

    def render(cells: Sequence[str]) -> str:
        first = cells[0].ljust(widths[0])
        rest = (cell.rjust(width) for cell, width in zip(cells[1:], widths[1:], strict=True))
        return "  ".join([first, *rest]).rstrip()

    rule = "  ".join("-" * width for width in widths)
    return "\n".join([render(header), rule, *(render(row) for row in rows)]) + "\n"
