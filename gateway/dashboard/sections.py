"""The dashboard's sections below the totals, each a chart (when it helps) and a table with its numbers."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from urllib.parse import urlencode

from gateway.dashboard.figures import MAIN_ACTIONS, Scan, Tally
from gateway.dashboard.svg import Bar, bars, stacked_days
from gateway.dashboard.text import count, dollars, share
from gateway.dashboard.view import ReportLink, View
from gateway.ledger.period import iso_time
from gateway.ledger.summary import Counters, SummaryRow

SERIES_SHOWN = 7
"""Series drawn apart in the daily chart; the rest add up as ``other``."""
CONVERSATIONS_SHOWN = 10

BASIS_MEANING = {
    "forwarded": "sent unchanged: what it cost is what it would have cost",
    "as_sent": "the unchanged request priced as the provider cached what was sent",
    "conversation": "priced with the cache the conversation had (known)",
    "conversation_cold": "the conversation's cache had expired: priced uncached",
    "conversation_lost": "the rewrite lost a cache the unchanged request would have kept",
    "opening": "priced with the cache of the conversation's opening",
    "tenant_share": "estimated: the tenant's usual cached share",
    "none": "estimated: no cache assumed",
    "over_window": "over the model's window: could not have been sent unchanged",
    "unknown": "recorded before the basis was kept",
}


def partial(scan: Scan) -> str:
    if scan.complete:
        return ""
    return f" (from the first {count(scan.events)} events of the period only)"


def _series(view: View) -> list[str]:
    sums: dict[str, int] = {}
    for values in view.per_day.values():
        for name, amount in values.items():
            sums[name] = sums.get(name, 0) + amount
    ranked = sorted(sums, key=lambda name: (-sums[name], name))
    return ranked


def per_day(view: View) -> str:
    ranked = _series(view)
    shown, rest = ranked[:SERIES_SHOWN], ranked[SERIES_SHOWN:]
    values: dict[str, dict[str, int]] = {}
    for day, per in view.per_day.items():
        values[day] = {name: per.get(name, 0) for name in shown}
        if rest:
            values[day]["other"] = sum(per.get(name, 0) for name in rest)
    series = [*shown, *(["other"] if rest else [])]
    title = f"Spend per day, stacked by {view.stack}"
    chart = stacked_days(view.days, series, values, title=title, chart_id="chart-days")
    head = "".join(f"<th scope='col'>{escape(name)}</th>" for name in series)
    rows = "".join(
        f"<tr><th scope='row'>{escape(day)}</th>"
        + "".join(f"<td>{escape(dollars(values.get(day, {}).get(name, 0)))}</td>" for name in series)
        + f"<td>{escape(dollars(sum(values.get(day, {}).values())))}</td></tr>"
        for day in view.days
    )
    table = (
        f"<table id='table-days'><caption class='note'>{escape(title)} (USD)</caption><thead><tr>"
        f"<th scope='col'>Day</th>{head}<th scope='col'>Total</th></tr></thead><tbody>{rows}</tbody></table>"
    )
    return f"<section><h2>{escape(title)}</h2>{chart}{table}</section>"


def _money_row(name: str, counters: Counters) -> str:
    return (
        f"<tr><th scope='row'>{escape(name)}</th><td>{count(counters.requests)}</td>"
        f"<td>{escape(dollars(counters.cost_nanos))}</td>"
        f"<td>{escape(dollars(counters.cost_nanos + counters.saving_nanos))}</td>"
        f"<td>{escape(dollars(counters.saving_nanos))}</td>"
        f"<td>{count(counters.input_tokens)}</td><td>{count(counters.cached_tokens)}</td>"
        f"<td>{count(counters.output_tokens)}</td></tr>"
    )


def money_table(ident: str, first: str, rows: Sequence[SummaryRow], total: Counters) -> str:
    head = "".join(
        f"<th scope='col'>{name}</th>"
        for name in (first, "Calls", "Cost", "Unchanged cost", "Saving", "Input", "Cached", "Output")
    )
    body = "".join(_money_row(row.key, row.counters) for row in rows)
    return (
        f"<table id='{ident}'><thead><tr>{head}</tr></thead><tbody>{body}</tbody>"
        f"<tfoot>{_money_row('Total', total)}</tfoot></table>"
    )


def saving(view: View) -> str:
    scan = view.scan
    ranked = sorted(scan.basis.items(), key=lambda item: (-item[1].counterfactual_nanos, item[0]))
    rows = "".join(
        f"<tr{' class=estimated' if guessed else ''}><th scope='row'>{escape(basis)}"
        f"{' (estimated)' if guessed else ''}</th><td>{escape(BASIS_MEANING.get(basis, ''))}</td>"
        f"<td>{count(tally.requests)}</td><td>{escape(dollars(tally.counterfactual_nanos))}</td>"
        f"<td>{escape(dollars(tally.cost_nanos))}</td><td>{escape(dollars(tally.saving_nanos))}</td></tr>"
        for (basis, guessed), tally in ranked
    )
    main = scan.main_total()
    return (
        "<section><h2>What forwarding unchanged would have cost</h2>"
        "<p class='note'>Each request's own call is priced as if it had been forwarded unchanged; the basis "
        "says how the cache it would have had was known. Side calls (summaries, shadow calls) would not "
        f"have been made: they count as cost with nothing saved{partial(scan)}.</p>"
        "<table id='table-basis'><thead><tr><th scope='col'>Basis</th><th scope='col'>Meaning</th>"
        "<th scope='col'>Requests</th><th scope='col'>Unchanged cost</th><th scope='col'>Cost</th>"
        f"<th scope='col'>Saving</th></tr></thead><tbody>{rows}</tbody><tfoot><tr><td>Requests</td><td></td>"
        f"<td>{count(main.requests)}</td><td>{escape(dollars(main.counterfactual_nanos))}</td>"
        f"<td>{escape(dollars(main.cost_nanos))}</td><td>{escape(dollars(main.saving_nanos))}</td></tr>"
        "</tfoot></table></section>"
    )


def tenants(view: View) -> str:
    total = view.total
    table = money_table("table-tenants", "Tenant", view.by_tenant, total)
    burn_rows = []
    chart_rows = []
    for burn in view.burns:
        limit = "no budget" if burn.limit_nanos is None else dollars(burn.limit_nanos)
        ratio = "-" if burn.burn is None else f"{100 * burn.burn:.1f}%"
        over = burn.limit_nanos is not None and burn.forecast_nanos > burn.limit_nanos
        burn_rows.append(
            f"<tr><th scope='row'>{escape(burn.tenant)}</th><td>{escape(dollars(burn.spent_nanos))}</td>"
            f"<td>{escape(dollars(burn.reserved_nanos))}</td><td>{escape(limit)}"
            f"{' (hard)' if burn.hard else ''}</td><td>{ratio}</td>"
            f"<td class='estimated'>{escape(dollars(burn.forecast_nanos))}{' — over budget' if over else ''}"
            "</td></tr>"
        )
        if burn.limit_nanos:
            chart_rows.append(Bar(burn.tenant, round(1000 * (burn.burn or 0)), f"{ratio} of {limit}"))
    month = view.burns[0].month if view.burns else ""
    chart = (
        bars(chart_rows, title=f"Monthly budget burned, {month}", chart_id="chart-burn", limit=1000)
        if chart_rows
        else ""
    )
    return (
        "<section><h2>Spend per tenant</h2>"
        f"{table}<h2>Budget burn, {escape(month)} (month so far, whatever the period above)</h2>"
        "<p class='note'>Forecast: the month's spend if it goes on at the rate of the month so far "
        "(a linear estimate). The dashed line marks the budget.</p>"
        f"{chart}<table id='table-burn'><thead><tr><th scope='col'>Tenant</th><th scope='col'>Spent</th>"
        "<th scope='col'>Held for requests in flight</th><th scope='col'>Monthly budget</th>"
        "<th scope='col'>Burned</th><th scope='col'>Month-end forecast (estimated)</th></tr></thead>"
        f"<tbody>{''.join(burn_rows)}</tbody></table></section>"
    )


def actions(view: View) -> str:
    scan = view.scan
    main = scan.main_total()
    names = [*MAIN_ACTIONS, *sorted(set(scan.actions) - set(MAIN_ACTIONS))]
    rows, chart_rows = [], []
    for name in names:
        tally = scan.actions.get(name, Tally())
        rows.append(
            f"<tr><th scope='row'>{escape(name)}</th><td>{count(tally.requests)}</td>"
            f"<td>{share(tally.requests, main.requests)}</td><td>{escape(dollars(tally.cost_nanos))}</td>"
            f"<td>{escape(dollars(tally.saving_nanos))}</td></tr>"
        )
        chart_rows.append(
            Bar(name, tally.requests, f"{count(tally.requests)} ({share(tally.requests, main.requests)})")
        )
    bands = [
        ("warning", "In the warning band"),
        ("over_cliff", "Past the cliff"),
        ("over_window", "Over the window"),
    ]
    band_cells = "".join(
        f"<div><dt>{escape(label)}</dt><dd id='band-{name}'>{count(scan.bands.get(name, 0))}</dd></div>"
        for name, label in bands
    )
    return (
        "<section><h2>Action mix</h2>"
        + bars(chart_rows, title="Requests by action", chart_id="chart-actions")
        + "<table id='table-actions'><thead><tr><th scope='col'>Action</th><th scope='col'>Requests</th>"
        "<th scope='col'>Share</th><th scope='col'>Cost</th><th scope='col'>Saving</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table>"
        "<p class='note'>A rejected request reaches no model and leaves no cost event: the ledger counts "
        "none "
        "(the <code>/metrics</code> counter <code>gateway_requests_total</code> does)"
        f"{partial(scan)}.</p>"
        f"<dl class='tiles'>{band_cells}<div><dt>Below the warning line</dt>"
        f"<dd id='band-below_warning'>{count(scan.bands.get('below_warning', 0))}</dd></div></dl></section>"
    )


def conversations(view: View) -> str:
    scan = view.scan
    rows = "".join(
        f"<tr><th scope='row'><code>{escape(found.name[:16])}</code></th><td>{escape(found.tenant)}</td>"
        f"<td>{escape(', '.join(sorted(found.models)))}</td><td>{count(found.tally.requests)}</td>"
        f"<td>{escape(iso_time(found.first_ms)[:16])}</td><td>{escape(iso_time(found.last_ms)[:16])}</td>"
        f"<td>{escape(dollars(found.tally.cost_nanos))}</td><td>{escape(dollars(found.tally.saving_nanos))}</td>"
        "</tr>"
        for found in scan.costliest(CONVERSATIONS_SHOWN)
    )
    untracked = scan.untracked
    return (
        "<section><h2>Costliest conversations</h2>"
        "<p class='note'>By the gateway's name for a conversation (a fingerprint of its opening or of the "
        "client's <code>prompt_cache_key</code>; no text is kept). Requests too small to be tracked "
        f"(<code>limits.track_conversations_from</code>): {count(untracked.requests)}, "
        f"{escape(dollars(untracked.cost_nanos))}{partial(scan)}.</p>"
        "<table id='table-conversations'><thead><tr><th scope='col'>Conversation</th>"
        "<th scope='col'>Tenant</th><th scope='col'>Models</th><th scope='col'>Requests</th>"
        "<th scope='col'>First (UTC)</th><th scope='col'>Last (UTC)</th><th scope='col'>Cost</th>"
        f"<th scope='col'>Saving</th></tr></thead><tbody>{rows}</tbody></table></section>"
    )


def side_calls(view: View) -> str:
    scan = view.scan
    side = scan.side_total()
    rows = "".join(
        f"<tr><th scope='row'>{escape(kind)}</th><td>{count(tally.requests)}</td>"
        f"<td>{escape(dollars(tally.cost_nanos))}</td></tr>"
        for kind, tally in sorted(scan.side.items())
    )
    return (
        "<section><h2>Side calls</h2><p class='note'>Calls the gateway made on a request's behalf: summaries "
        "for compression, embeddings, experiments' shadow calls, attempts that timed out. Included in the "
        f"spend above{partial(scan)}.</p><table id='table-side'><thead><tr><th scope='col'>Kind</th>"
        f"<th scope='col'>Calls</th><th scope='col'>Cost</th></tr></thead><tbody>{rows}</tbody>"
        f"<tfoot><tr><td>Total</td><td>{count(side.requests)}</td><td id='side-cost'>"
        f"{escape(dollars(side.cost_nanos))}</td></tr></tfoot></table></section>"
    )


def models(view: View) -> str:
    return (
        "<section><h2>Spend per model</h2>"
        + money_table("table-models", "Model", view.by_model, view.total)
        + "</section>"
    )


def links(view: View) -> str:
    query = {"format": "csv"}
    if view.chosen.start:
        query["from"] = view.chosen.start
    if view.chosen.end:
        query["to"] = view.chosen.end
    if view.tenant:
        query["tenant"] = view.tenant
    pages = {**query, "format": "html"}
    exports = [
        ReportLink("Cost events (CSV)", "/admin/costs?" + urlencode(query)),
        ReportLink("Cost events (FOCUS)", "/admin/costs?" + urlencode({**query, "format": "focus"})),
        ReportLink("Summary per tenant (CSV)", "/admin/costs/summary?" + urlencode(query)),
        ReportLink("Total cost per model and context length", "/admin/costs/models?" + urlencode(pages)),
        ReportLink("Replay under the config in force", "/admin/replay?" + urlencode(pages)),
    ]
    items = "".join(
        f"<li><a href='{escape(link.href)}'>{escape(link.label)}</a></li>" for link in [*view.links, *exports]
    )
    empty = "" if view.links else "<p class='note'>No behaviour map or experiment has data yet.</p>"
    return f"<section class='noprint'><h2>Reports</h2>{empty}<ul id='reports'>{items}</ul></section>"
