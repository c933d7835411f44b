"""The total-cost view as an aligned table (the CLI) and as an HTML page (the admin route).

Thin cells are marked (``thin`` in the table, greyed in HTML) and never coloured: nothing is painted as
a finding.
"""

from __future__ import annotations

import html
from typing import Any

COLUMNS = (
    "model", "bucket", "requests", "spend $", "in $/1K", "latency p10/p50/p90 ms", "ttft p50 ms",
    "fail", "retry", "transform", "$/success", "",
)  # fmt: skip


def _percent(rate: float | None) -> str:
    return "-" if rate is None else f"{rate:.1%}"


def _spread(spread: dict[str, Any] | None) -> str:
    return "-" if spread is None else f"{spread['p10']}/{spread['p50']}/{spread['p90']}"


def cells(row: dict[str, Any]) -> list[str]:
    ttft = row["first_token_ms"]
    return [
        row["model"],
        row["bucket"],
        str(row["requests"]),
        row["spend_usd"],
        row["input_usd_per_1k_tokens"] or "-",
        _spread(row["latency_ms"]),
        "-" if ttft is None else str(ttft["p50"]),
        _percent(row["failure_rate"]),
        _percent(row["retry_rate"]),
        _percent(row["transform_share"]),
        row["cost_per_success_usd"] or "-",
        "thin" if row["thin"] else "",
    ]


def table(document: dict[str, Any]) -> str:
    lines = [cells(row) for row in document["rows"]]
    widths = [max(len(text) for text in column) for column in zip(COLUMNS, *lines, strict=True)]

    def render(values: list[str] | tuple[str, ...]) -> str:
        first = [values[0].ljust(widths[0]), values[1].ljust(widths[1])]
        rest = [value.rjust(width) for value, width in zip(values[2:], widths[2:], strict=True)]
        return "  ".join(first + rest).rstrip() + "\n"

    period = document["period"]
    out = [f"{period['from']} to {period['to']}: {document['events']:,} events\n", render(COLUMNS)]
    out.append("  ".join("-" * width for width in widths) + "\n")
    out += [render(line) for line in lines]
    out.append(
        f"thin: fewer than {document['thin_below_requests']} requests (shown, not a finding); $/success adds "
        "failed requests, retries and side calls\n"
    )
    for pair in document["experiments"]:
        out.append(f"\nexperiment {pair['experiment']}, {pair['bucket']}:\n")
        for model, row in pair["models"].items():
            out.append("  " + render(cells({"model": model, "bucket": pair["bucket"], **row})))
    for model, spend in document["unattributed_side_spend_usd"].items():
        out.append(f"side calls of {model} whose request was not found: ${spend}\n")
    return "".join(out)


_STYLE = (
    "body{font:14px system-ui,sans-serif;margin:24px}table{border-collapse:collapse}"
    "td,th{padding:4px 8px;border-bottom:1px solid #dde;text-align:right}td:nth-child(-n+2){text-align:left}"
    "tr.thin td{color:#8a949e;background:#f3f5f7}"
)


def page(document: dict[str, Any]) -> str:
    def rows(source: list[dict[str, Any]]) -> str:
        out = []
        for row in source:
            mark = ' class="thin"' if row["thin"] else ""
            out.append(f"<tr{mark}>" + "".join(f"<td>{html.escape(c)}</td>" for c in cells(row)) + "</tr>")
        return "".join(out)

    head = "<tr>" + "".join(f"<th>{html.escape(name)}</th>" for name in COLUMNS) + "</tr>"
    period = document["period"]
    parts = [
        f"<!doctype html><meta charset=utf-8><title>Total cost per model</title><style>{_STYLE}</style>",
        "<h1>Total cost per model and context length</h1>",
        f"<p>{html.escape(period['from'])} to {html.escape(period['to'])}: {document['events']:,} events. "
        f"Greyed rows have fewer than {document['thin_below_requests']} requests: shown, not findings. "
        "$/success adds failed requests, retries and side calls.</p>",
        f"<table>{head}{rows(document['rows'])}</table>",
    ]
    for pair in document["experiments"]:
        paired = [{"model": model, "bucket": pair["bucket"], **row} for model, row in pair["models"].items()]
        parts.append(f"<h2>Experiment {html.escape(pair['experiment'])}, {html.escape(pair['bucket'])}</h2>")
        parts.append(f"<table>{head}{rows(paired)}</table>")
    return "".join(parts)
