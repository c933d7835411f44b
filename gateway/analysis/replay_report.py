"""Replay's report as JSON data, an aligned table and an HTML page: recorded and replayed side by side."""

from __future__ import annotations

import html
from typing import Any

from gateway.analysis.replay import Pair, Replay, Side
from gateway.base.money import usd
from gateway.ledger.period import iso_time


def _side(side: Side) -> dict[str, Any]:
    return {
        "requests": side.requests,
        "spend_usd": usd(side.total_nanos, trim=True),
        "request_spend_usd": usd(side.spend_nanos, trim=True),
        "side_call_spend_usd": usd(side.side_nanos, trim=True),
        "counterfactual_usd": usd(side.counterfactual_nanos, trim=True),
        "saving_usd": usd(side.saving_nanos, trim=True),
        "over_cliff": side.over_cliff,
    }


def _pair(pair: Pair) -> dict[str, Any]:
    recorded, replayed = pair.recorded.total_nanos, pair.replayed.total_nanos
    change = None if recorded == 0 else round((replayed - recorded) / recorded, 4)
    return {"recorded": _side(pair.recorded), "replayed": _side(pair.replayed), "spend_change": change}


def document(result: Replay, *, period: dict[str, str], candidate: str) -> dict[str, Any]:
    bands = sorted({band for band, _, _ in result.actions})
    actions: dict[str, dict[str, dict[str, int]]] = {}
    for band in bands:
        row: dict[str, dict[str, int]] = {}
        for (found, which, action), count in sorted(result.actions.items()):
            if found == band:
                row.setdefault(action, {"recorded": 0, "replayed": 0})[which] += count
        actions[band] = row
    return {
        "object": "gateway.replay",
        "candidate": candidate,
        "period": period,
        "events": result.events,
        "first_event": iso_time(result.first_ms) if result.first_ms is not None else None,
        "last_event": iso_time(result.last_ms) if result.last_ms is not None else None,
        "total": _pair(result.total),
        "actions_by_band": actions,
        "tenants": {name: _pair(pair) for name, pair in sorted(result.tenants.items())},
        "models": {name: _pair(pair) for name, pair in sorted(result.models.items())},
        "counterfactual_bases": dict(sorted(result.bases.items())),
        "uncertainty": dict(sorted(result.uncertainty.items(), key=lambda item: (-item[1], item[0]))),
        "notes": [
            "Recorded: the cost events as written. Replayed: the same requests decided by the candidate's "
            "policies on the prompt's count as received, priced at the candidate's prices.",
            "Bands: recorded actions under the band recorded with them, replayed actions under the "
            "candidate's band of the same prompt.",
            "Spend includes side calls (summaries, embeddings, billed timeouts) and experiments' calls.",
        ],
    }


def _rows(document: dict[str, Any]) -> list[list[str]]:
    lines = [["", "requests", "recorded $", "replayed $", "change", "over cliff", "saving $ rec/rep"]]

    def line(name: str, pair: dict[str, Any]) -> list[str]:
        recorded, replayed = pair["recorded"], pair["replayed"]
        change = "-" if pair["spend_change"] is None else f"{pair['spend_change']:+.1%}"
        return [
            name,
            str(recorded["requests"]),
            recorded["spend_usd"],
            replayed["spend_usd"],
            change,
            f"{recorded['over_cliff']} -> {replayed['over_cliff']}",
            f"{recorded['saving_usd']} / {replayed['saving_usd']}",
        ]

    lines.append(line("TOTAL", document["total"]))
    lines += [line(f"tenant {name}", pair) for name, pair in document["tenants"].items()]
    lines += [line(f"model {name}", pair) for name, pair in document["models"].items()]
    return lines


def _aligned(lines: list[list[str]]) -> str:
    widths = [max(len(line[index]) for line in lines) for index in range(len(lines[0]))]
    out = []
    for line in lines:
        rest = [cell.rjust(width) for cell, width in zip(line[1:], widths[1:], strict=True)]
        cells = [line[0].ljust(widths[0]), *rest]
        out.append("  ".join(cells).rstrip())
    return "\n".join(out) + "\n"


def _action_lines(document: dict[str, Any]) -> list[list[str]]:
    lines = [["band", "action", "recorded", "replayed"]]
    for band, row in document["actions_by_band"].items():
        for action, counts in row.items():
            lines.append([band, action, str(counts["recorded"]), str(counts["replayed"])])
    return lines


def table(document: dict[str, Any]) -> str:
    total = document["total"]
    out = [
        f"replay of {document['events']:,} events from {document['period']['from']} to "
        f"{document['period']['to']} under {document['candidate']}\n\n",
        _aligned(_rows(document)),
        f"\nside calls: recorded ${total['recorded']['side_call_spend_usd']}, replayed "
        f"${total['replayed']['side_call_spend_usd']}; counterfactual: recorded "
        f"${total['recorded']['counterfactual_usd']}, replayed "
        f"${total['replayed']['counterfactual_usd']}\n\n",
        "actions by band\n",
        _aligned(_action_lines(document)),
        "\nwhat replay could not know (requests or calls affected):\n",
    ]
    out += [f"  {count:>8,}  {reason}\n" for reason, count in document["uncertainty"].items()]
    if not document["uncertainty"]:
        out.append("  nothing: every request replayed as recorded\n")
    bases = ", ".join(f"{name} {count}" for name, count in document["counterfactual_bases"].items())
    out.append(f"counterfactual bases: {bases or 'none'}\n")
    return "".join(out)


def page(document: dict[str, Any]) -> str:
    def rows(lines: list[list[str]]) -> str:
        head = "<tr>" + "".join(f"<th>{html.escape(cell)}</th>" for cell in lines[0]) + "</tr>"
        body = "".join(
            "<tr>" + "".join(f"<td>{html.escape(cell)}</td>" for cell in line) + "</tr>" for line in lines[1:]
        )
        return f"<table>{head}{body}</table>"

    style = (
        "body{font:14px system-ui,sans-serif;margin:24px}table{border-collapse:collapse;margin:8px 0}"
        "td,th{padding:4px 8px;border-bottom:1px solid #dde;text-align:right}td:first-child{text-align:left}"
    )
    uncertainty = "".join(
        f"<li>{count:,}: {html.escape(reason)}</li>" for reason, count in document["uncertainty"].items()
    )
    period = document["period"]
    return "".join(
        [
            f"<!doctype html><meta charset=utf-8><title>Replay</title><style>{style}</style>",
            f"<h1>Replay under {html.escape(document['candidate'])}</h1>",
            f"<p>{document['events']:,} events from {html.escape(period['from'])} to "
            f"{html.escape(period['to'])}.</p>",
            rows(_rows(document)),
            "<h2>Actions by band</h2>",
            rows(_action_lines(document)),
            "<h2>What replay could not know</h2>",
            f"<ul>{uncertainty or '<li>nothing: every request replayed as recorded</li>'}</ul>",
            "".join(f"<p>{html.escape(note)}</p>" for note in document["notes"]),
        ]
    )
