"""The behaviour report as one self-contained HTML file: inline CSS, no scripts, no external fonts or images.

A heatmap of bucket x signal percentiles (buckets as columns, context growing to the right): each cell is
shaded by how much worse it is than the best bucket of its row, from green (as good) to red (the boundary
``factor`` times worse or more), so noise stays green; the boundary bucket is marked and every degraded
cell is outlined. Below it, the probe recall grid (length x
depth) and the degradations in words.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from gateway.sampling.buckets import tokens_label
from gateway.sampling.config import BoundaryConfig
from gateway.sampling.document import iso
from gateway.sampling.percentiles import Spread
from gateway.sampling.recall import RecallGrid
from gateway.sampling.report import BehaviourReport, BucketStats

Kind = Literal["level", "rate"]


@dataclass(frozen=True, slots=True)
class Column:
    group: str
    name: str
    value: Callable[[BucketStats], float | None]
    show: Callable[[float], str]
    badness: Callable[[float], float]
    """Maps a value to a number that grows as things get worse (as in ``gateway.sampling.boundary``)."""
    kind: Kind = "level"
    signal: str | None = None
    """The boundary signal this row shows, so a degraded cell can be outlined."""


Value = Callable[[BucketStats], float | None]


def _pick(spread: Callable[[BucketStats], Spread | None], which: str) -> Value:
    def value(stats: BucketStats) -> float | None:
        found = spread(stats)
        return float(getattr(found, which)) if found is not None else None

    return value


def _seconds(value: float) -> str:
    return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.2f} s"


def _share(value: float) -> str:
    return f"{value:.1%}"


def _plain(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def _same(value: float) -> float:
    return value


def _inverse(value: float) -> float:
    return 1 / value if value > 0 else math.inf


def _miss(recall: float) -> float:
    return 1 - recall


def _negative(value: float) -> float:
    return -value


def _spread_columns(
    group: str, spread: Callable[[BucketStats], Spread | None], show: Callable[[float], str],
    badness: Callable[[float], float], signal: str | None = None,
) -> list[Column]:  # fmt: skip
    return [
        Column(group, which, _pick(spread, which), show, badness, "level", signal if which == "p50" else None)
        for which in ("p10", "p50", "p90")
    ]


def _worst(stats: BucketStats, name: str) -> float | None:
    value: float | None = getattr(stats.worst, name) if stats.worst is not None else None
    return value


COLUMNS: tuple[Column, ...] = (
    *_spread_columns("latency", lambda s: s.latency, _seconds, _same),
    *_spread_columns("time to first token", lambda s: s.ttft, _seconds, _same),
    *_spread_columns("ttft per 1K input", lambda s: s.ttft_per_1k, _seconds, _same, "ttft_per_1k"),
    *_spread_columns("output tokens", lambda s: s.output_tokens, _plain, _inverse),
    *_spread_columns("tokens / s", lambda s: s.tokens_per_second, _plain, _inverse, "tokens_per_second"),
    *_spread_columns("mean logprob", lambda s: s.logprob_mean, _plain, _negative, "logprob_mean"),
    Column("rates", "errors", lambda s: s.error_rate, _share, _same, "rate", "error_rate"),
    Column("rates", "length|empty", lambda s: s.length_or_empty_share, _share, _same, "rate",
           "length_or_empty"),
    Column("rates", "probe recall", lambda s: s.probes.recall, _share, _miss, "rate", "probe_recall"),
    Column("slowest 10%", "logprob p10", lambda s: _worst(s, "logprob_mean_p10"), _plain, _negative),
    Column("slowest 10%", "output p10", lambda s: _worst(s, "output_tokens_p10"), _plain, _inverse),
)

CSS = """
body{font:14px/1.4 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:24px;color:#1d232b;
background:#fff}
h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:28px 0 8px}
.meta{color:#5b6673;margin:0 0 16px}
table{border-collapse:collapse;font-variant-numeric:tabular-nums}
th,td{border:1px solid #d5dbe1;padding:4px 7px;text-align:right;white-space:nowrap}
th{background:#f1f4f7;font-weight:600}th.group{text-align:center}
td.bucket,th.bucket{text-align:left;font-weight:600;background:#f7f9fb}
td.empty{color:#9aa4ae;background:#fafbfc}
th.group{text-align:left;vertical-align:top;background:#f7f9fb}th.stat{font-weight:400;color:#5b6673}
.heatmap .boundary{border-left:3px solid #c62828}
td.degraded{outline:3px solid #c62828;outline-offset:-3px;font-weight:700}
.badge{display:inline-block;margin-left:6px;padding:0 6px;border-radius:8px;background:#c62828;color:#fff;
font-size:11px;font-weight:700;vertical-align:1px}
.boundary-note{border-left:4px solid #c62828;background:#fdf1f1;padding:8px 12px;margin:12px 0}
.ok-note{border-left:4px solid #2e7d32;background:#f0f7f0;padding:8px 12px;margin:12px 0}
.legend span{display:inline-block;width:18px;height:12px;vertical-align:middle;margin:0 2px}
ul{margin:6px 0;padding-left:20px}
"""


def render_html(report: BehaviourReport) -> str:
    degraded = {(found.bucket.index, found.signal) for found in report.degradations}
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>Behaviour map: {_e(report.model)}</title>",
        f"<style>{CSS}</style></head><body>",
        f"<h1>Behaviour map: {_e(report.model)}</h1>",
        f'<p class="meta">{report.samples:,} sampled requests from {iso(report.since)} to {iso(report.until)}'
        + (f"; {report.unknown_length:,} without a prompt size" if report.unknown_length else "")
        + (f"; oldest sample {iso(report.oldest)}" if report.oldest is not None else "")
        + ". Columns: context-length buckets; rows: p10 / p50 / p90 of each signal. Green is as good as the"
        f" best bucket of the row, red is {report.boundary_config.factor:g} times worse or more.</p>",
        _boundary_note(report),
        _heatmap(report, degraded),
        _legend(report.boundary_config.factor),
    ]
    if not report.recall.empty:
        parts += ["<h2>Needle probe recall (length x depth)</h2>", _recall_table(report.recall)]
        found = report.probe_boundary
        parts.append(
            f'<p class="boundary-note">Recall falls at {_e(found.describe())}</p>'
            if found
            else '<p class="ok-note">Recall held across the probed lengths.</p>'
        )
    if report.degradations:
        parts.append("<h2>Degradations</h2><ul>")
        parts += [f"<li>{_e(found.describe())}</li>" for found in report.degradations]
        parts.append("</ul>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def _boundary_note(report: BehaviourReport) -> str:
    boundary = report.boundary
    if boundary is None:
        return '<p class="ok-note">No effective-context boundary found: no signal degraded between buckets ' \
            "with enough samples.</p>"
    details = "".join(f"<li>{_e(found.describe())}</li>" for found in boundary.degradations)
    return (
        '<div class="boundary-note"><strong>Effective-context boundary: '
        f"{_e(boundary.bucket.label)}</strong> "
        f"(signal: {_e(', '.join(boundary.signals))})<ul>{details}</ul></div>"
    )


def _heatmap(report: BehaviourReport, degraded: set[tuple[int, str]]) -> str:
    """Buckets left to right (context grows to the right), one row per signal percentile."""
    boundary_index = report.boundary.bucket.index if report.boundary else None
    config = report.boundary_config

    def edge(stats: BucketStats) -> str:
        return ' class="boundary"' if stats.bucket.index == boundary_index else ""

    head = ['<table class="heatmap"><thead><tr><th class="bucket" colspan="2">context length</th>']
    for stats in report.buckets:
        badge = '<br><span class="badge">boundary</span>' if stats.bucket.index == boundary_index else ""
        head.append(f"<th{edge(stats)}>{_e(stats.bucket.label)}{badge}</th>")
    head.append('</tr><tr><th class="bucket" colspan="2">samples</th>')
    head += [f"<th{edge(stats)}>{stats.count:,}</th>" for stats in report.buckets]
    head.append("</tr></thead><tbody>")
    rows = []
    spans = {group: sum(1 for column in COLUMNS if column.group == group) for group in _groups()}
    seen: set[str] = set()
    for column in COLUMNS:
        values = [column.value(stats) for stats in report.buckets]
        best = _best(values, column)
        cells = []
        if column.group not in seen:
            seen.add(column.group)
            cells.append(f'<th class="group" rowspan="{spans[column.group]}">{_e(column.group)}</th>')
        cells.append(f'<th class="stat">{_e(column.name)}</th>')
        for stats, value in zip(report.buckets, values, strict=True):
            flagged = column.signal is not None and (stats.bucket.index, column.signal) in degraded
            boundary = stats.bucket.index == boundary_index
            cells.append(_cell(value, column, best, config, flagged=flagged, boundary=boundary))
        rows.append(f"<tr>{''.join(cells)}</tr>")
    return "".join(head) + "".join(rows) + "</tbody></table>"


def _groups() -> list[str]:
    groups: list[str] = []
    for column in COLUMNS:
        if column.group not in groups:
            groups.append(column.group)
    return groups


def _cell(value: float | None, column: Column, best: float | None, config: BoundaryConfig, *, flagged: bool,
          boundary: bool) -> str:  # fmt: skip
    classes = [name for name, on in (("degraded", flagged), ("boundary", boundary)) if on]
    if value is None or best is None:
        return f'<td class="{" ".join(["empty", *classes])}">-</td>'
    shade = severity(column.badness(value), best, column.kind, config)
    attribute = f' class="{" ".join(classes)}"' if classes else ""
    return f'<td{attribute} style="background:{_colour(shade)}">{_e(column.show(value))}</td>'


def severity(bad: float, best: float, kind: Kind, config: BoundaryConfig) -> float:
    """0 for as good as the row's best bucket, 1 for ``factor`` times worse (the boundary's yardstick)."""
    if kind == "rate":
        floor = config.rate_floor
        ratio = (bad + floor) / (best + floor) if best + floor > 0 else 1.0
        rose = (bad - best) / config.min_rate_increase if config.min_rate_increase > 0 else 1.0
        shade = (ratio - 1) / (config.factor - 1) * min(1.0, rose)
    elif best > 0:
        shade = (bad / best - 1) / (config.factor - 1)
    else:
        shade = 0.0 if bad <= best else 1.0
    return min(1.0, max(0.0, shade))


def _recall_table(grid: RecallGrid) -> str:
    head = "<table><thead><tr><th class=bucket>length</th>" + "".join(
        f"<th>depth {depth:g}</th>" for depth in grid.depths
    ) + "<th>all depths</th></tr></thead><tbody>"
    rows = []
    for length in grid.lengths:
        cells = [f'<td class="bucket">{_e(tokens_label(length))}</td>']
        for tally in [*(grid.cell(length, depth) for depth in grid.depths), grid.row(length)]:
            recall = tally.recall
            if recall is None:
                cells.append('<td class="empty">-</td>')
            else:
                cells.append(f'<td style="background:{_colour(1 - recall)}">{_e(str(tally))}</td>')
        rows.append(f"<tr>{''.join(cells)}</tr>")
    return head + "".join(rows) + "</tbody></table>"


def _legend(factor: float) -> str:
    swatches = "".join(f'<span style="background:{_colour(step / 4)}"></span>' for step in range(5))
    return (
        f'<p class="legend meta">as good as the best bucket {swatches} {factor:g}x worse or more &nbsp; '
        "outlined: degraded against the previous bucket (the boundary rule)</p>"
    )


def _best(values: Sequence[float | None], column: Column) -> float | None:
    present = [column.badness(value) for value in values if value is not None]
    return min(present) if present else None


def _colour(badness: float) -> str:
    """Green (0) through yellow to red (1), light enough for dark text."""
    badness = min(1.0, max(0.0, badness))
    return f"hsl({120 * (1 - badness):.0f},70%,80%)"


def _e(text: str) -> str:
    return html.escape(text, quote=True)
