"""An event's FOCUS rows rendered by PostgreSQL: the text ``gateway.ledger.focus`` gives it in CSV, byte
for byte, for a row ``focus_plain`` admits (the gateway renders the others from their JSON).

Steps of one query (``gateway.ledger.archive_export``), each a subquery over the one before, so that
what an event's rows share is computed once: ``focus_steps()`` decides which rows are plain, then (for
those only, so that nothing an odd row holds can fail the query) computes the event's quantities and
times, then the runs of cells every row of the event shares and each unit's cost and price;
``focus_rows()`` writes the rows from them, in one ``format`` call an event. Besides a plain text
(``export_sql``), a plain row has at most one kind of tool use, in the form ``web_search=2``; token counts
and amounts far from the 64-bit limits (what is computed from them stays exact in ``bigint``); a call
that ended before the year 10000; and no caller's tag under the ``gateway/`` prefix.

A unit price is exact: the amount times 10⁶ over the quantity, rounded half to even, in units of 10⁻¹⁵
USD (``focus._unit_price`` rounds the same way). Times are a timestamp's text under ``DateStyle`` ``ISO``
(``2026-12-01 00:00:07``, which the export sets for its transaction), its space made a ``T``: the same
as ``to_char`` would write, at about half the cost.
"""

from __future__ import annotations

from gateway.ledger.export_sql import (
    Cell,
    Constant,
    flag,
    literal,
    segments,
    template,
    timestamp,
    usd,
)
from gateway.ledger.focus import ACCOUNT, BUCKETS, FOCUS_COLUMNS, TAG_PREFIX

TOKENS_BOUND = 2**59
"""Token counts within ± this: a quantity (up to three of them added) and twice it stay within 64 bits."""
NANOS_BOUND = 10**12
"""Amounts within ± this (1,000 USD a unit): twice the amount times 10⁶, plus a quantity, stays within
64 bits."""
LAST_SECOND = 253_402_300_799  # 9999-12-31T23:59:59Z
_TOOL_USE = r"^[A-Za-z0-9_][A-Za-z0-9_.-]*=[0-9]{1,17}$"
_AMOUNTS = (
    "cost_nanos", "tool_cost_nanos", "input_cost_nanos", "cached_input_cost_nanos", "cache_write_cost_nanos",
    "output_cost_nanos",
)  # fmt: skip
_TOKEN_COUNTS = ("input_tokens", "cached_tokens", "cache_write_tokens", "output_tokens")
_TOOL_KIND = "nullif(split_part(tool_uses, '=', 1), '')"

_UNITS = {  # name: (meter, unit, quantity, nanos, whether the event has the row)
    "input": ("Input Tokens", "Tokens", "focus_input", "input_cost_nanos", "focus_parts"),
    "cached": ("Cached Input Tokens", "Tokens", "focus_cached", "cached_input_cost_nanos",
               "focus_parts AND (focus_cached <> 0 OR cached_input_cost_nanos <> 0)"),
    "written": ("Cache Write Tokens", "Tokens", "focus_written", "cache_write_cost_nanos",
                "focus_parts AND (focus_written <> 0 OR cache_write_cost_nanos <> 0)"),
    "output": ("Output Tokens", "Tokens", "output_tokens", "output_cost_nanos",
               "focus_parts AND (output_tokens <> 0 OR output_cost_nanos <> 0)"),
    "tool": ("", "Requests", "focus_tool_uses", "tool_cost_nanos",
             f"({_TOOL_KIND} IS NOT NULL OR tool_cost_nanos <> 0)"),
}  # fmt: skip
"""The priced units (``focus.units``), over the second step's columns; the tool row's meter is
``focus_tool_meter``. An event whose cost is not its units' (``focus_parts`` false) has one row of
``Tokens`` instead of the first four."""


def _bucket() -> str:
    cases = [f"WHEN input_tokens < {bucket.high} THEN {literal(bucket.label)}" for bucket in BUCKETS[:-1]]
    return f"CASE {' '.join(cases)} ELSE {literal(BUCKETS[-1].label)} END"


def _tags() -> tuple[str, ...]:
    """The ``Tags`` cell: the caller's tags (as written), then the gateway's, as a CSV cell (in quotes, its
    quotes doubled). Only the caller's part is searched for quotes to double: the gateway's keys are
    written with theirs doubled, and its values (a plain tenant and action, a bucket's label) hold none."""
    own = (
        "CASE WHEN tags IS NULL OR tags::text = '{}' THEN '{'"
        " ELSE replace(left(tags::text, -1), '\"', '\"\"') || ',' END"
    )
    return (
        Constant('"'), own, Constant(f'""{TAG_PREFIX}tenant"":""'), "tenant",
        Constant(f'"",""{TAG_PREFIX}action"":""'), "action", Constant(f'"",""{TAG_PREFIX}bucket"":""'),
        _bucket(), Constant('""}"'),
    )  # fmt: skip


_SHARED: dict[str, Cell] = {
    "BillingAccountId": Constant(ACCOUNT),
    "BillingAccountName": Constant(ACCOUNT),
    "BillingCurrency": Constant("USD"),
    "BillingPeriodEnd": ("focus_next_month", Constant("-01T00:00:00Z")),
    "BillingPeriodStart": ("left(focus_start, 7)", Constant("-01T00:00:00Z")),
    "ChargeCategory": Constant("Usage"),
    "ChargeClass": Constant(""),
    "ChargeFrequency": Constant("Usage-Based"),
    "ChargePeriodEnd": ("focus_end", Constant("Z")),
    "ChargePeriodStart": ("focus_start", Constant("Z")),
    "InvoiceIssuerName": "provider",
    "PricingCategory": Constant("Standard"),
    "ProviderName": "provider",
    "PublisherName": "provider",
    "ResourceId": "model",
    "ResourceName": "model",
    "ResourceType": Constant("Model"),
    "ServiceCategory": Constant("AI and Machine Learning"),
    "ServiceName": Constant("LLM inference"),
    "ServiceSubcategory": Constant("Generative AI"),
    "SkuId": "focus_sku",
    "SubAccountId": "tenant",
    "SubAccountName": "tenant",
    "Tags": _tags(),
    "x_RequestId": "id",
    "x_ParentId": "parent_id",
    "x_Action": "action",
    "x_CounterfactualBasis": "counterfactual_basis",
    "x_Estimated": flag("estimated"),
}
"""The cells every row of an event has alike (over the second step's columns)."""


def focus_steps() -> list[dict[str, str]]:
    """The columns each step computes, in order."""
    bounded = " AND ".join(
        [
            *(f"{name} BETWEEN {-TOKENS_BOUND} AND {TOKENS_BOUND}" for name in _TOKEN_COUNTS),
            *(f"coalesce({name}, 0) BETWEEN {-NANOS_BOUND} AND {NANOS_BOUND}" for name in _AMOUNTS),
        ]
    )
    plain = f"""(coalesce(plain, false) AND {bounded}
        AND greatest(latency_ms, 0) <= {(LAST_SECOND - 1) * 1000} - time_ms
        AND (tool_uses IS NULL OR tool_uses = '' OR tool_uses ~ {literal(_TOOL_USE)})
        AND (tags IS NULL OR strpos(tags::text, {literal(f'"{TAG_PREFIX}')}) = 0))"""
    parts = (  # (bounded: the sum stays within 64 bits)
        "(input_cost_nanos IS NOT NULL AND input_cost_nanos + cached_input_cost_nanos"
        " + cache_write_cost_nanos + output_cost_nanos + tool_cost_nanos = cost_nanos)"
    )
    cached = "least(cached_tokens, input_tokens)"
    written = f"least(cache_write_tokens, input_tokens - {cached})"
    tokens_cost = usd("cost_nanos::numeric - tool_cost_nanos")
    ended = "greatest(time_ms / 1000 + 1, (time_ms + greatest(latency_ms, 0) + 999) / 1000)"
    event = {
        "focus_parts": parts,
        "focus_cached": cached,
        "focus_written": written,
        "focus_input": f"input_tokens - {cached} - {written}",
        "focus_tool_uses": "coalesce(nullif(split_part(tool_uses, '=', 2), '')::bigint, 0)",
        "focus_tokens": "input_tokens + output_tokens",
        "focus_start": _iso_second("time_ms / 1000"),
        "focus_end": _iso_second(ended),
        "focus_next_month": "left((month + 31)::text, 7)",  # (``month`` is a month's first day)
        "focus_sku": "model || ':' || coalesce(nullif(tier, ''), 'standard')",
        "focus_of": "' of ' || model || ' (' || action || ')'",
        "focus_tool_meter": f"coalesce({_TOOL_KIND} || ' uses', 'Tool Uses')",
        "focus_counterfactual": usd("counterfactual_nanos"),
        "focus_saving": usd("counterfactual_nanos::numeric - cost_nanos"),
    }
    shared = _rows()[0]
    shared["focus_tool_meter_id"] = (
        f"CASE WHEN {_UNITS['tool'][4]} THEN lower(replace(focus_tool_meter, ' ', '-')) END"
    )
    shared["focus_tokens_cost"] = f"CASE WHEN focus_parts THEN NULL ELSE {tokens_cost}::text END"  # its row's
    for name, (_, _, quantity, nanos, has) in _UNITS.items():
        shared[f"focus_{name}_cost"] = f"CASE WHEN {has} THEN {usd(nanos)}::text END"  # written 4 times
        shared[f"focus_{name}_price"] = f"CASE WHEN {has} THEN {unit_price(nanos, quantity)} END"
    return [
        {"focus_plain": plain},
        {name: f"CASE WHEN focus_plain THEN {value} END" for name, value in event.items()},
        {name: f"CASE WHEN focus_plain THEN {value} END" for name, value in shared.items()},
    ]


def _iso_second(seconds: str) -> str:
    """``2026-12-01T00:00:07`` (``Z`` is written after it): the timestamp's text under ``DateStyle``
    ``ISO`` (which the export sets), its space made a ``T``; cheaper than ``to_char``."""
    return f"replace({timestamp(seconds)}::text, ' ', 'T')"


def unit_price(nanos: str, quantity: str) -> str:
    """USD per unit to 15 places, trailing zeros dropped (``0`` for none); NULL for no quantity. With
    ``a`` the amount times 10⁶ and ``q`` the quantity, ``(2a + q) / 2q`` rounds ``a / q`` half up, and
    an exact half (``(2a + q) % 2q = 0``) that lands on an odd number goes down to the even one."""
    doubled, twice = f"(2000000 * abs({nanos}) + {quantity})", f"(2 * {quantity})"
    up = f"({doubled} / {twice})"
    even = f"({up} - CASE WHEN {doubled} % {twice} = 0 AND {up} % 2 = 1 THEN 1 ELSE 0 END)"
    signed = f"(CASE WHEN {nanos} < 0 THEN -1 ELSE 1 END * {even})"
    return f"CASE WHEN {quantity} > 0 THEN trim_scale({signed}::numeric * 0.000000000000001)::text END"


def focus_rows() -> str:
    """The event's FOCUS rows, each ended by ``\\r\\n`` (over the steps' columns): one ``format`` call,
    whose template is the rows' templates the event has, joined (the rows refer to one list of
    arguments)."""
    arguments: list[str] = []
    rows = {name: literal(template(cells, arguments) + "\r\n") for name, cells in _rows()[1].items()}
    chosen = [f"CASE WHEN focus_parts THEN {rows['input']} ELSE {rows['tokens']} END"]
    chosen += [
        f"CASE WHEN {_UNITS[name][4]} THEN {rows[name]} ELSE '' END"
        for name in ("cached", "written", "output", "tool")
    ]
    return f"format({' || '.join(chosen)}, {', '.join(arguments)})"


def _rows() -> tuple[dict[str, str], dict[str, list[Cell]]]:
    """The SQL of the runs of shared cells (``segment_<n>``), and each unit's row as cells."""
    units = {
        name: _unit_cells(meter, unit, quantity, name, first=name == "input")
        for name, (meter, unit, quantity, _, _) in _UNITS.items()
    }
    units["tokens"] = _unit_cells("Tokens", "Tokens", "focus_tokens", "tokens", first=True)
    shared: dict[str, str] = {}
    rows: dict[str, list[Cell]] = {}
    for name, cells in units.items():
        shared, rows[name] = segments(cells, _SHARED, FOCUS_COLUMNS)
    return shared, rows


def _unit_cells(meter: str, unit: str, quantity: str, name: str, *, first: bool) -> dict[str, Cell]:
    cost = f"focus_{name}_cost"
    price: Cell = Constant("") if name == "tokens" else f"focus_{name}_price"  # tokens: no unit price
    shown = Constant(meter) if meter else "focus_tool_meter"
    price_id: Cell = (
        ("focus_sku", Constant(":" + meter.lower().replace(" ", "-")))
        if meter
        else ("focus_sku", Constant(":"), "focus_tool_meter_id")
    )
    return {
        "BilledCost": cost,
        "ChargeDescription": (shown, "focus_of"),
        "ConsumedQuantity": quantity,
        "ConsumedUnit": Constant(unit),
        "ContractedCost": cost,
        "ContractedUnitPrice": price,
        "EffectiveCost": cost,
        "ListCost": cost,
        "ListUnitPrice": price,
        "PricingQuantity": quantity,
        "PricingUnit": Constant(unit),
        "SkuMeter": shown,
        "SkuPriceId": price_id,
        "x_CounterfactualCostUSD": "focus_counterfactual" if first else Constant(""),
        "x_SavingUSD": "focus_saving" if first else Constant(""),
    }
