"""The dashboard's HTML: the login form and the page, written on the server (no script), with a print
stylesheet; every chart has a table with the same numbers beside it (``sections``)."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from gateway.dashboard import sections
from gateway.dashboard.periods import PERIODS
from gateway.dashboard.style import STYLE
from gateway.dashboard.text import count, dollars
from gateway.dashboard.view import View
from gateway.ledger.period import iso_time


def _document(title: str, body: str) -> str:
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)}</title><style>{STYLE}</style></head><body>{body}</body></html>"
    )


def login_page(message: str | None = None) -> str:
    said = f'<p role="alert" class="error"><strong>{escape(message)}</strong></p>' if message else ""
    body = (
        "<main><h1>Gateway costs</h1><p>Sign in with the gateway's admin key "
        "(<code>GATEWAY_ADMIN_KEY</code>)."
        " It is kept as a signed session cookie for 12 hours, never in the address.</p>"
        f'{said}<form method="post" action="/admin/dashboard/login">'
        '<div class="field"><label for="key">Admin key</label><input id="key" name="key" type="password" '
        'autocomplete="current-password" required autofocus size="40"></div>'
        ' <p><button type="submit">Sign in</button></p></form></main>'
    )
    return _document("Sign in · Gateway costs", body)


def message_page(title: str, message: str) -> str:
    return _document(title, f"<main><h1>{escape(title)}</h1><p>{escape(message)}</p></main>")


def dashboard_page(view: View) -> str:
    period = view.chosen.period
    heading = (
        f"<header><h1>Gateway costs</h1><span class='basis'>{escape(iso_time(period.start_ms))} to "
        f"{escape(iso_time(period.end_ms))} (UTC, end exclusive)</span>"
        '<form method="post" action="/admin/dashboard/logout" class="noprint">'
        '<button class="plain" type="submit">Sign out</button></form></header>'
    )
    parts = [
        _filters(view),
        f'<p class="basis" id="basis">Read from {escape(view.basis)}.{_same_as(view)}</p>',
        _tiles(view),
        sections.per_day(view),
        sections.saving(view),
        sections.tenants(view),
        sections.actions(view),
        sections.conversations(view),
        sections.side_calls(view),
        sections.models(view),
        sections.links(view),
    ]
    return _document("Gateway costs", heading + "<main>" + "".join(parts) + "</main>")


def _same_as(view: View) -> str:
    """The command whose numbers the page's are; with a tag filter, only one tag and no model filter
    have one: the row of the tag's value."""
    if not view.tags:
        return f" Same numbers as <code>{escape(_command(view))}</code>."
    if len(view.tags) == 1 and not view.model:
        value = next(iter(view.tags.values()))
        return f" Same totals as the row {escape(value)} of <code>{escape(_command(view))}</code>."
    return ""


def _command(view: View) -> str:
    words = ["gateway costs summary"]
    if view.chosen.start:
        words.append(f"--from {view.chosen.start}")
    if view.chosen.end:
        words.append(f"--to {view.chosen.end}")
    if view.tenant:
        words.append(f"--tenant {view.tenant}")
    if view.tags and len(view.tags) == 1 and not view.model:
        words.append(f"--group-by tag:{next(iter(view.tags))}")
    else:
        words.append("--group-by model" if view.model else "--group-by tenant")
    return " ".join(words)


def _options(values: Sequence[tuple[str, str]], chosen: str) -> str:
    return "".join(
        f'<option value="{escape(value)}"{" selected" if value == chosen else ""}>{escape(label)}</option>'
        for value, label in values
    )


def _filters(view: View) -> str:
    chosen = view.chosen
    start = chosen.start if chosen.name == "custom" else ""
    end = chosen.end if chosen.name == "custom" else ""
    tenants = [("", "All tenants"), *((name, name) for name in view.tenants)]
    models = [("", "All models"), *((name, name) for name in view.models)]
    periods = list(PERIODS.items())
    stacks = [("model", "Model"), ("tenant", "Tenant")]
    return (
        '<form class="filters" method="get" action="/admin/dashboard" aria-label="What to show">'
        + _field(
            "period", "Period", f"<select name='period' id='period'>{_options(periods, chosen.name)}</select>"
        )
        + _field("from", "From (custom)", _day_input("from", start))
        + _field("to", "To, inclusive", _day_input("to", end))
        + _field(
            "tenant",
            "Tenant",
            f"<select name='tenant' id='tenant'>{_options(tenants, view.tenant or '')}</select>",
        )
        + _field(
            "model", "Model", f"<select name='model' id='model'>{_options(models, view.model or '')}</select>"
        )
        + _field(
            "stack", "Stack by", f"<select name='stack' id='stack'>{_options(stacks, view.stack)}</select>"
        )
        + _field(
            "tag",
            "Tags (key=value, ...)",
            f"<input type='text' name='tag' id='tag' value='{escape(tags_text(view.tags))}' "
            "placeholder='team=search' size='18'>",
        )
        + '<button type="submit" id="apply">Apply</button></form>'
        '<p class="note noprint">Tags: only the calls carrying all the tags given; their totals are read '
        "event by event (the daily counters hold no tags).</p>"
    )


def tags_text(tags: dict[str, str] | None) -> str:
    return ",".join(f"{key}={value}" for key, value in (tags or {}).items())


def _field(ident: str, label: str, control: str) -> str:
    return f"<div class='field'><label for='{ident}'>{escape(label)}</label>{control}</div>"


def _day_input(name: str, value: str | None) -> str:
    """A date picker; a text field for a bound with a time of day (a date picker cannot show it)."""
    kind = "date" if not value or len(value) == 10 else "text"
    return f"<input type='{kind}' name='{name}' id='{name}' value='{escape(value or '')}'>"


def _tiles(view: View) -> str:
    total, scan = view.total, view.scan
    estimated = sum(tally.saving_nanos for (_, guessed), tally in scan.basis.items() if guessed)
    tiles = [
        ("total-cost", "Spend", dollars(total.cost_nanos), total.cost_nanos),
        (
            "total-counterfactual",
            "Forwarded unchanged would have cost",
            dollars(total.cost_nanos + total.saving_nanos),
            total.cost_nanos + total.saving_nanos,
        ),
        ("total-saving", "Saving", dollars(total.saving_nanos), total.saving_nanos),
        ("total-requests", "Calls (requests and side calls)", count(total.requests), total.requests),
    ]
    cells = "".join(
        f'<div><dt>{escape(label)}</dt><dd id="{ident}" data-value="{value}">{escape(text)}</dd></div>'
        for ident, label, text, value in tiles
    )
    note = (
        f'<p class="note estimated" id="saving-estimated">Of the saving, {escape(dollars(estimated))} rests '
        "on estimates (usage counted by the gateway, or a cache assumed: <em>tenant_share</em>, "
        "<em>none</em>)"
        f"{sections.partial(scan)}.</p>"
    )
    return f'<section aria-label="Totals"><dl class="tiles">{cells}</dl>{note}</section>'
