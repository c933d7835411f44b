"""The experiment report as one self-contained HTML file: inline CSS, no scripts, no external fonts or images.

In the behaviour map's style (``gateway.sampling.report.html``): context-length buckets as columns, context
growing to the right, the header giving each bucket's pairs and matching requests; rows of p10 / p50 /
p90, a primary row above its candidate row, every cell with the count behind it. Candidate cells are
shaded against the primary's (``gateway.experiments.report.rows``); buckets with fewer pairs than
``min_samples`` are greyed, shown but not compared. First the projected monthly difference (what a reader
comes for), then above the table the verdicts, the budget and the counters (why any were shed); below it
the verdict of each bucket, the projection's notes and the pairs that agreed least.
"""

from __future__ import annotations

import html
from collections.abc import Callable

from gateway.experiments.report.figures import dollars, share
from gateway.experiments.report.report import BucketReport, ExperimentReport
from gateway.experiments.report.rows import Row, rows_for
from gateway.ledger.period import iso_time
from gateway.sampling.report.html import CSS as MAP_CSS
from gateway.sampling.report.shading import colour

CSS = (
    MAP_CSS
    + """
.verdict-note{border-left:4px solid #3d6fb6;background:#f1f5fb;padding:8px 12px;margin:12px 0;
max-width:1100px}
.verdict-note ul{margin:4px 0}
table.facts td,table.facts th{text-align:left}
td.id{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;text-align:left}
tr.candidate th.stat{color:#1d232b}
p.headline{font-size:17px;font-weight:600;margin:4px 0 12px}
"""
)


def render_html(report: ExperimentReport) -> str:
    title = f"Experiment: {_e(report.name)}"
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{title}</title>",
        f"<style>{CSS}</style></head><body>",
        f"<h1>{title}</h1>",
        f'<p class="headline">{_e(_capital(report.headline()))}</p>',
        f'<p class="meta">{_e(_describe(report))}</p>',
        _verdict_note(report),
        _facts(report),
        *([f'<p class="meta">{_e(note)}.</p>'] if (note := report.shed_note()) else []),
        _table(report),
        _legend(report),
        "<h2>Verdict by bucket</h2><ul>",
        *(f"<li>{_e(item.verdict.text)}</li>" for item in report.buckets),
        "</ul>",
    ]
    notes = [item for item in report.buckets if item.projection.note and item.projection.matching]
    if notes:
        parts.append("<h2>Buckets that project nothing</h2><ul>")
        parts += [f"<li>{_e(item.bucket.label)}: {_e(item.projection.note or '')}</li>" for item in notes]
        parts.append("</ul>")
    if report.mode == "shadow":
        parts.append(_worst(report))
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def _describe(report: ExperimentReport) -> str:
    config = report.config
    if config is None:
        head = f"{report.mode} experiment, not configured now: the report of its data alone."
    else:
        state = "enabled" if config.enabled else "disabled"
        what = "of matching requests mirrored" if report.mode == "shadow" else "of matching conversations"
        head = (
            f"{report.mode}: {', '.join(config.primary)} against the candidate {config.candidate},"
            f" {config.sample_rate:.0%} {what}; {state}."
        )
    counted = f"{report.pairs:,} {'pairs' if report.mode == 'shadow' else 'requests'}"
    window = (
        f" {counted} from {iso_time(report.since_ms)} to {iso_time(report.until_ms)}; traffic counted from"
        f" {iso_time(report.traffic_since_ms)} (whole UTC days)."
    )
    if report.oldest_ms is not None:
        window += f" Oldest pair {iso_time(report.oldest_ms)}."
    if report.unreadable or report.other_mode:
        window += f" Left out: {report.unreadable:,} unreadable, {report.other_mode:,} of the other mode."
    return (
        head + window + " Columns: context-length buckets by the prompt tokens the gateway received; rows:"
        " p10 / p50 / p90, the primary above the candidate, each cell with the number of calls behind it."
        " Latency, time to first token and output over the calls that answered; cost over every call."
    )


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


def _verdict_note(report: ExperimentReport) -> str:
    """The verdicts, but the projection: it heads the page."""
    items = "".join(f"<li>{_e(line)}</li>" for line in report.verdict if line != report.headline())
    css = "verdict-note" if any(item.verdict.enough for item in report.buckets) else "thin-note"
    return f'<div class="{css}"><strong>Verdict</strong><ul>{items}</ul></div>'


def _facts(report: ExperimentReport) -> str:
    budget = report.budget_nanos
    spent = dollars(report.spent_today_nanos)
    if budget:
        spent += f" ({share(report.spent_today_nanos / budget)})"
    cells = [
        ("budget a day", dollars(budget) if budget is not None else "none"),
        ("spent today", spent),
        ("matching requests", f"{report.matching:,}"),
        ("their cost", dollars(report.matching_cost_nanos)),
        *((name.replace("_", " "), f"{count:,}") for name, count in report.mode_counters().items()),
    ]  # fmt: skip
    head = "".join(f"<th>{_e(name)}</th>" for name, _ in cells)
    body = "".join(f"<td>{_e(value)}</td>" for _, value in cells)
    return f'<table class="facts"><tr>{head}</tr><tr>{body}</tr></table>'


def _table(report: ExperimentReport) -> str:
    rows = rows_for(shadow=report.mode == "shadow")
    head = ['<h2>Primary against candidate, by context length</h2><table class="heatmap"><thead>',
            _header(report), "</thead><tbody>"]  # fmt: skip
    spans: dict[str, int] = {}
    for row in rows:
        spans[row.group] = spans.get(row.group, 0) + 1
    seen: set[str] = set()
    body = []
    for row in rows:
        cells = []
        if row.group not in seen:
            seen.add(row.group)
            cells.append(f'<th class="group" rowspan="{spans[row.group]}">{_e(row.group)}</th>')
        cells.append(f'<th class="stat">{_e(row.name)}</th>')
        cells += [_cell(row, item, report.min_samples) for item in report.buckets]
        css = ' class="candidate"' if "candidate" in row.name else ""
        body.append(f"<tr{css}>{''.join(cells)}</tr>")
    return "".join(head) + "".join(body) + "</tbody></table>"


def _header(report: ExperimentReport) -> str:
    def line(title: str, render: Callable[[BucketReport], str], *extra: str) -> str:
        cells = []
        for item in report.buckets:
            classes = [*extra, *([] if item.verdict.enough else ["thin"])]
            attribute = f' class="{" ".join(classes)}"' if classes else ""
            cells.append(f"<th{attribute}>{render(item)}</th>")
        return f'<tr><th class="bucket" colspan="2">{title}</th>{"".join(cells)}</tr>'

    lines = [line("context length (prompt tokens received)", lambda item: _e(item.bucket.label))]
    if report.mode == "shadow":
        lines.append(line("pairs", lambda item: f"{item.comparison.pairs:,}"))
    else:
        lines.append(line("requests: candidate / primary arm", _arms))
    lines.append(line("matching requests", lambda item: f"{item.projection.matching:,}"))
    lines.append(line("candidate actions", lambda item: _mix(item.comparison.candidate.actions), "info"))
    return "".join(lines)


def _arms(item: BucketReport) -> str:
    return f"{item.comparison.candidate.count:,} / {item.comparison.primary.count:,}"


def _mix(counts: dict[str, int]) -> str:
    return "<br>".join(f"{_e(name)} {count:,}" for name, count in counts.items()) or "-"


def _cell(row: Row, item: BucketReport, min_samples: int) -> str:
    value = row.value(item)
    trusted = row.trusted(item, min_samples)
    if value is None:
        return f'<td class="empty{"" if trusted else " thin"}">-</td>'
    content = f'{_e(row.show(value))}<span class="n">{row.count(item):,}</span>'
    shade = row.shade(item) if row.shade is not None and trusted else None
    if not trusted:
        return f'<td class="thin">{content}</td>'
    if shade is None:
        return f'<td class="plain">{content}</td>'
    return f'<td style="background:{colour(shade)}">{content}</td>'


def _legend(report: ExperimentReport) -> str:
    swatches = "".join(
        f'<span class="swatch" style="background:{colour(step / 4)}"></span>' for step in range(5)
    )
    grey = '<span class="swatch" style="background:#eceff2"></span>'
    whose = "the primary's" if report.mode == "shadow" else "the primary arm's"
    return (
        f'<p class="legend meta">candidate cells against {whose} in the same bucket: as good or better'
        f" {swatches} 1.5x worse or more (a rate: from 2%, by at least 5 points); agreement from the same"
        f" answer (1) to none of it (0) on the same scale. Primary cells and output tokens are shown, not"
        f" judged. {grey} fewer than {report.min_samples} pairs in the bucket (split: in either arm), or"
        " fewer values in the cell: shown, not compared. Small numbers: the calls behind each cell.</p>"
    )


def _worst(report: ExperimentReport) -> str:
    rows = []
    for item in report.buckets:
        agreement = item.comparison.agreement
        for found in agreement.worst if agreement is not None else ():
            judge = f"{found.judge:.2f}" if found.judge is not None else "-"
            rows.append(
                f'<tr><td class="bucket">{_e(item.bucket.label)}</td>'
                f'<td class="id">{_e(found.request_id)}</td><td>{found.score:.2f}</td>'
                f"<td>{_e(found.kind)}</td><td>{judge}</td></tr>"
            )
    if not rows:
        return '<h2>Least agreement</h2><p class="meta">No pair has an agreement score yet.</p>'
    return (
        "<h2>Least agreement (the lowest scores of each bucket)</h2><table><thead><tr>"
        '<th class="bucket">bucket</th><th>request id</th><th>score</th><th>kind</th><th>judge</th>'
        "</tr></thead><tbody>" + "".join(rows) + "</tbody></table>"
    )


def _e(text: str) -> str:
    return html.escape(text, quote=True)
