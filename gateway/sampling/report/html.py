"""The behaviour report as one self-contained HTML file: inline CSS, no scripts, no external fonts or images.

A heatmap of bucket x signal percentiles (buckets as columns, context growing to the right). Buckets are
by the tokens the model received; the header gives each one's samples, the size the gateway received
(mean / median prompt tokens) and the action mix, so a column of compressed requests says so. Every cell
shows the count behind it; cells with fewer samples than the boundary compares (``min_count``, probes:
``min_probe_count``) are greyed, shown but neither compared nor coloured. The colours are each row's own
range (``gateway.sampling.report.shading``); the boundary bucket is marked and every degraded cell outlined.
Below it, the probe recall grid (length x depth) and the degradations in words.
"""

from __future__ import annotations

import html
from collections.abc import Callable

from gateway.config.schema.sampling import BoundaryConfig
from gateway.sampling.probes.recall import RecallGrid
from gateway.sampling.report.document import iso
from gateway.sampling.report.report import BehaviourReport, BucketStats
from gateway.sampling.report.rows import COLUMNS, Column
from gateway.sampling.report.shading import Scale, colour
from gateway.sampling.report.verdict import coverage, recall_verdict
from gateway.tokens.buckets import size_label, tokens_label

CSS = """
body{font:14px/1.4 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:24px;color:#1d232b;
background:#fff}
h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:28px 0 8px}
.meta{color:#5b6673;margin:0 0 16px;max-width:1100px}
table{border-collapse:collapse;font-variant-numeric:tabular-nums}
th,td{border:1px solid #d5dbe1;padding:4px 7px;text-align:right;white-space:nowrap}
th{background:#f1f4f7;font-weight:600}th.group{text-align:center}
td.bucket,th.bucket{text-align:left;font-weight:600;background:#f7f9fb}
th.info{font-weight:400;color:#3d4752;font-size:12px;vertical-align:top}
td.empty{color:#9aa4ae;background:#fafbfc}
th.group{text-align:left;vertical-align:top;background:#f7f9fb}th.stat{font-weight:400;color:#5b6673}
td.thin,th.thin{color:#8a949e;background:#eceff2}
td.plain{background:#f7f9fb}
td.implausible{background:#fff4d6;color:#7a5a00}
.n{display:inline-block;min-width:2.2em;margin-left:5px;color:#6b7682;font-size:11px;text-align:right}
.thin .n{color:#9aa4ae}
.heatmap .boundary{border-left:3px solid #c62828}
td.degraded{outline:3px solid #c62828;outline-offset:-3px;font-weight:700}
.badge{display:inline-block;margin-left:6px;padding:0 6px;border-radius:8px;background:#c62828;color:#fff;
font-size:11px;font-weight:700;vertical-align:1px}
.boundary-note{border-left:4px solid #c62828;background:#fdf1f1;padding:8px 12px;margin:12px 0}
.ok-note{border-left:4px solid #2e7d32;background:#f0f7f0;padding:8px 12px;margin:12px 0}
.thin-note{border-left:4px solid #9aa4ae;background:#f3f5f7;padding:8px 12px;margin:12px 0}
.legend span.swatch{display:inline-block;width:18px;height:12px;vertical-align:middle;margin:0 2px;
border:1px solid #d5dbe1}
ul{margin:6px 0;padding-left:20px}
"""


def render_html(report: BehaviourReport) -> str:
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>Behaviour map: {_e(report.model)}</title>",
        f"<style>{CSS}</style></head><body>",
        f"<h1>Behaviour map: {_e(report.model)}</h1>",
        f'<p class="meta">{report.samples:,} sampled requests from {iso(report.since)} to {iso(report.until)}'
        + (f"; {report.unknown_length:,} without a prompt size" if report.unknown_length else "")
        + (f"; oldest sample {iso(report.oldest)}" if report.oldest is not None else "")
        + ". Columns: context-length buckets by the tokens the model received (after any compression), with"
        " the size the gateway received beside them; rows: p10 / p50 / p90 of each signal, each cell with"
        " the number of samples behind it. Latency is the main call's; the side calls of compressed"
        " requests are shown apart.</p>",
        _boundary_note(report),
        _heatmap(report),
        _implausible_note(report),
        _legend(report.boundary_config),
    ]
    if not report.recall.empty:
        parts += ["<h2>Needle probe recall (length x depth)</h2>", _recall_table(report.recall)]
        parts.append(_recall_note(report))
    if report.degradations:
        parts.append("<h2>Degradations</h2><ul>")
        parts += [f"<li>{_e(found.describe())}</li>" for found in report.degradations]
        parts.append("</ul>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def _boundary_note(report: BehaviourReport) -> str:
    boundary = report.boundary
    if boundary is None:
        found = coverage(report.buckets, report.boundary_config)
        if not found.enough:
            return f'<p class="thin-note">No effective-context boundary: {_e(found.describe())}.</p>'
        return (
            f'<p class="ok-note">No effective-context boundary found across {found.compared} buckets with'
            f" enough samples (at least {found.min_count} each): no signal degraded between them.</p>"
        )
    details = "".join(f"<li>{_e(found.describe())}</li>" for found in boundary.degradations)
    return (
        '<div class="boundary-note"><strong>Effective-context boundary: '
        f"{_e(boundary.bucket.label)}</strong> "
        f"(signal: {_e(', '.join(boundary.signals))})<ul>{details}</ul></div>"
    )


def _implausible_note(report: BehaviourReport) -> str:
    """The cells whose value no model could produce (tokens per second of an answer delivered at once,
    e.g. buffered by a proxy, or cached): said in words, since they are neither shaded nor compared."""
    config = report.boundary_config
    found = [
        f"{column.name} {column.show(value)} at {stats.bucket.label}"
        for column in COLUMNS
        for stats in report.buckets
        if (value := column.value(stats)) is not None and column.implausible(value, config)
    ]
    if not found:
        return ""
    return (
        f'<p class="thin-note">Implausible tokens per second (above {config.max_tokens_per_second:,g}, marked'
        f" ?): {_e('; '.join(found))}. No model writes that fast: those answers arrived at once (buffered on"
        " the way, or cached), so their time measures delivery, not generation; not shaded, not compared.</p>"
    )


def _recall_note(report: BehaviourReport) -> str:
    found = report.probe_boundary
    if found is not None:
        return f'<p class="boundary-note">Recall falls at {_e(found.describe())}</p>'
    verdict = recall_verdict(report.recall, report.boundary_config)
    css = "ok-note" if verdict.answering else "boundary-note"
    return f'<p class="{css}">No length boundary: {_e(verdict.text)}.</p>'


def _heatmap(report: BehaviourReport) -> str:
    """Buckets left to right (context grows to the right), one row per signal percentile."""
    boundary_index = report.boundary.bucket.index if report.boundary else None
    head = ['<table class="heatmap"><thead>', _header(report, boundary_index), "</thead><tbody>"]
    degraded = {(found.bucket.index, found.signal) for found in report.degradations}
    rows = []
    spans = {column.group: sum(1 for other in COLUMNS if other.group == column.group) for column in COLUMNS}
    seen: set[str] = set()
    for column in COLUMNS:
        cells = []
        if column.group not in seen:
            seen.add(column.group)
            cells.append(f'<th class="group" rowspan="{spans[column.group]}">{_e(column.group)}</th>')
        cells.append(f'<th class="stat">{_e(column.name)}</th>')
        cells += _row(report, column, degraded, boundary_index)
        rows.append(f"<tr>{''.join(cells)}</tr>")
    return "".join(head) + "".join(rows) + "</tbody></table>"


def _header(report: BehaviourReport, boundary_index: int | None) -> str:
    """The bucket's label, its samples, the size received (mean / median) and the action mix."""

    def cell(stats: BucketStats, content: str, *extra: str) -> str:
        classes = [*extra, *(["boundary"] if stats.bucket.index == boundary_index else [])]
        classes += [] if stats.enough_samples else ["thin"]
        attribute = f' class="{" ".join(classes)}"' if classes else ""
        return f"<th{attribute}>{content}</th>"

    def line(title: str, render: Callable[[BucketStats], str], *extra: str) -> str:
        cells = "".join(cell(stats, render(stats), *extra) for stats in report.buckets)
        return f'<tr><th class="bucket" colspan="2">{title}</th>{cells}</tr>'

    def label(stats: BucketStats) -> str:
        badge = '<br><span class="badge">boundary</span>' if stats.bucket.index == boundary_index else ""
        return _e(stats.bucket.label) + badge

    return "".join([
        line("context length (tokens the model received)", label),
        line("samples", lambda stats: f"{stats.count:,}"),
        line("received: mean / median tokens", _received, "info"),
        line("actions", _actions, "info"),
    ])  # fmt: skip


def _received(stats: BucketStats) -> str:
    if stats.received_tokens is None or stats.received_mean is None:
        return "-"
    return f"{size_label(stats.received_mean)} / {size_label(stats.received_tokens.p50)}"


def _actions(stats: BucketStats) -> str:
    return "<br>".join(f"{_e(action)} {count:,}" for action, count in stats.actions.items()) or "-"


def _row(
    report: BehaviourReport, column: Column, degraded: set[tuple[int, str]], boundary_index: int | None
) -> list[str]:
    config = report.boundary_config
    values = [column.value(stats) for stats in report.buckets]
    trusted = [column.trusted(stats, config) for stats in report.buckets]
    ranged = [
        value
        for value, ok in zip(values, trusted, strict=True)
        if ok and value is not None and not column.implausible(value, config)
    ]
    scale = Scale.of([column.badness(value) for value in ranged], column.kind, config)
    cells = []
    for stats, value, ok in zip(report.buckets, values, trusted, strict=True):
        classes = [
            name
            for name, on in (
                ("degraded", column.signal is not None and (stats.bucket.index, column.signal) in degraded),
                ("boundary", stats.bucket.index == boundary_index),
                ("thin", not ok),
                ("implausible", value is not None and column.implausible(value, config)),
            )
            if on
        ]
        cells.append(_cell(value, column.count(stats), column, scale, classes))
    return cells


def _cell(value: float | None, count: int, column: Column, scale: Scale, classes: list[str]) -> str:
    if value is None:
        return f'<td class="{" ".join(["empty", *classes])}">-</td>'
    content = f'{_e(column.show(value))}<span class="n">{count:,}</span>'
    if "implausible" in classes:
        title = "implausible: faster than any model writes; an answer delivered at once"
        return f'<td class="{" ".join(classes)}" title="{title}">{content} ?</td>'
    if "thin" in classes or not column.shaded:
        extra = [] if "thin" in classes else ["plain"]
        return f'<td class="{" ".join([*classes, *extra])}">{content}</td>'
    attribute = f' class="{" ".join(classes)}"' if classes else ""
    return f'<td{attribute} style="background:{colour(scale.shade(column.badness(value)))}">{content}</td>'


def _recall_table(grid: RecallGrid) -> str:
    head = (
        "<table><thead><tr><th class=bucket>length</th>"
        + "".join(f"<th>depth {depth:g}</th>" for depth in grid.depths)
        + "<th>all depths</th></tr></thead><tbody>"
    )
    rows = []
    for length in grid.lengths:
        cells = [f'<td class="bucket">{_e(tokens_label(length))}</td>']
        for tally in [*(grid.cell(length, depth) for depth in grid.depths), grid.row(length)]:
            recall = tally.recall
            if recall is None:
                cells.append('<td class="empty">-</td>')
            else:
                cells.append(f'<td style="background:{colour(1 - recall)}">{_e(str(tally))}</td>')
        rows.append(f"<tr>{''.join(cells)}</tr>")
    return head + "".join(rows) + "</tbody></table>"


def _legend(config: BoundaryConfig) -> str:
    swatches = "".join(
        f'<span class="swatch" style="background:{colour(step / 4)}"></span>' for step in range(5)
    )
    grey = '<span class="swatch" style="background:#eceff2"></span>'
    return (
        f'<p class="legend meta">each row against its own range (a rate: from none): its best bucket'
        f" {swatches} its worst; a row whose worst is less than {config.factor:g}x its best is toned down,"
        " so noise stays green."
        f" {grey} fewer than {config.min_count} samples ({config.min_probe_count} probes): shown, not"
        f" compared. Tokens / s: of answers of {config.min_answer_tokens}+ tokens (a shorter one's rate is"
        " its call's overhead). Small numbers: samples behind each cell. Outlined: degraded against the"
        " previous bucket (the boundary rule).</p>"
    )


def _e(text: str) -> str:
    return html.escape(text, quote=True)
