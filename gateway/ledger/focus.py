"""Cost events as FinOps FOCUS 1.2 rows, for tools that ingest FOCUS unchanged.

One ``Usage`` row per priced unit of a cost event, so that ``BilledCost / PricingQuantity`` is that
unit's price: uncached input tokens, cached input tokens, tokens written to the provider's cache,
output tokens, and the server-side tool uses (one row per kind; several kinds in one event share a row,
whose cost is then their sum). A unit with neither quantity nor cost has no row, except the input row,
which every event has: it carries the event's counterfactual and saving (``x_CounterfactualCostUSD``,
``x_SavingUSD``), so summing those columns over all rows gives the ledger's totals once.

No ``Credit`` rows: a saving is spend avoided, not money the provider gave back, and a negative saving is
not a charge either; both stay in the gateway's own columns. ``ListCost`` = ``ContractedCost`` =
``EffectiveCost`` = ``BilledCost``: the gateway pays list prices, with no negotiated or commitment
discounts. Summary calls and other side calls are spend like any other call: ``Usage`` rows.

Date-times are ``YYYY-MM-DDTHH:mm:ssZ`` (FOCUS's format, whole seconds): a charge period starts at the
event's second and ends at the first whole second after its call ended (at least a second later).
``Tags`` is a JSON object: the gateway's own keys carry its prefix (``gateway/``), as FOCUS asks of
provider-defined tags; the caller's tags (``CostEvent.tags``: the key's defaults and the request's, merged
into the gateway's one user-defined tag scheme) go in unprefixed and unaltered, as FOCUS 1.1 and 1.2 ask
of a data generator's only user-defined scheme. Their keys cannot contain ``/``, so none can take the
reserved ``gateway/`` prefix (``gateway.base.tags``).

Events written before the ledger recorded the cost by unit (``CostEvent.cost_parts`` missing) get one
token row (input and output together, ``SkuMeter`` ``Tokens``, no unit price) and their tool row.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import orjson

from gateway.base.money import NANOS_PER_USD, usd
from gateway.config.schema.sampling import DEFAULT_BUCKET_EDGES
from gateway.ledger.event import CostEvent
from gateway.ledger.period import month_of
from gateway.tokens.buckets import bucket_index, buckets_for

FOCUS_COLUMNS = (
    "BilledCost", "BillingAccountId", "BillingAccountName", "BillingCurrency", "BillingPeriodEnd",
    "BillingPeriodStart", "ChargeCategory", "ChargeClass", "ChargeDescription", "ChargeFrequency",
    "ChargePeriodEnd", "ChargePeriodStart", "ConsumedQuantity", "ConsumedUnit", "ContractedCost",
    "ContractedUnitPrice", "EffectiveCost", "InvoiceIssuerName", "ListCost", "ListUnitPrice",
    "PricingCategory", "PricingQuantity", "PricingUnit", "ProviderName", "PublisherName", "ResourceId",
    "ResourceName", "ResourceType", "ServiceCategory", "ServiceName", "ServiceSubcategory", "SkuId",
    "SkuMeter", "SkuPriceId", "SubAccountId", "SubAccountName", "Tags",
    "x_RequestId", "x_ParentId", "x_Action", "x_CounterfactualBasis", "x_Estimated",
    "x_CounterfactualCostUSD", "x_SavingUSD",
)  # fmt: skip
ACCOUNT = "llm-cost-gateway"
TAG_PREFIX = "gateway/"
UNIT_PRICE_PLACES = 15
BUCKETS = buckets_for(DEFAULT_BUCKET_EDGES)

Cell = str | int | None


@dataclass(frozen=True, slots=True)
class Unit:
    """One priced unit of an event: what ``SkuMeter`` names, how many, in what, for how much."""

    meter: str
    unit: str
    quantity: int
    nanos: int


def bucket_of(tokens: int) -> str:
    return BUCKETS[bucket_index(tokens, DEFAULT_BUCKET_EDGES)].label


def units(event: CostEvent) -> list[Unit]:
    """The event's priced units, its input first (always present)."""
    found: list[Unit] = []
    parts = event.cost_parts
    if parts is None or sum(parts) + event.tool_cost_nanos != event.cost_nanos:
        tokens = event.input_tokens + event.output_tokens
        found.append(Unit("Tokens", "Tokens", tokens, event.cost_nanos - event.tool_cost_nanos))
    else:
        cached = min(event.cached_tokens, event.input_tokens)
        written = min(event.cache_write_tokens, event.input_tokens - cached)
        found.append(Unit("Input Tokens", "Tokens", event.input_tokens - cached - written, parts[0]))
        found.extend(
            Unit(meter, "Tokens", quantity, nanos)
            for meter, quantity, nanos in (
                ("Cached Input Tokens", cached, parts[1]),
                ("Cache Write Tokens", written, parts[2]),
                ("Output Tokens", event.output_tokens, parts[3]),
            )
            if quantity or nanos
        )
    uses = _tool_uses(event.tool_uses)
    if uses or event.tool_cost_nanos:
        meter = f"{next(iter(uses))} uses" if len(uses) == 1 else "Tool Uses"
        found.append(Unit(meter, "Requests", sum(uses.values()), event.tool_cost_nanos))
    return found


def focus_rows(event: CostEvent) -> list[tuple[Cell, ...]]:
    """The event's rows, one per priced unit, in ``FOCUS_COLUMNS`` order."""
    month = month_of(event.time_ms)
    start_s = event.time_ms // 1000
    end_s = max(start_s + 1, -(-(event.time_ms + max(0, event.latency_ms)) // 1000))
    tags = orjson.dumps(
        {
            **(event.tags or {}),
            f"{TAG_PREFIX}tenant": event.tenant,
            f"{TAG_PREFIX}action": event.action,
            f"{TAG_PREFIX}bucket": bucket_of(event.input_tokens),
        }
    ).decode()
    sku = f"{event.model}:{event.tier or 'standard'}"
    common: dict[str, Cell] = {
        "BillingAccountId": ACCOUNT,
        "BillingAccountName": ACCOUNT,
        "BillingCurrency": "USD",
        "BillingPeriodStart": f"{month}-01T00:00:00Z",
        "BillingPeriodEnd": _next_month(month),
        "ChargeCategory": "Usage",
        "ChargeFrequency": "Usage-Based",
        "ChargePeriodStart": _second(start_s),
        "ChargePeriodEnd": _second(end_s),
        "InvoiceIssuerName": event.provider,
        "PricingCategory": "Standard",
        "ProviderName": event.provider,
        "PublisherName": event.provider,
        "ResourceId": event.model,
        "ResourceName": event.model,
        "ResourceType": "Model",
        "ServiceCategory": "AI and Machine Learning",
        "ServiceName": "LLM inference",
        "ServiceSubcategory": "Generative AI",
        "SkuId": sku,
        "SubAccountId": event.tenant,
        "SubAccountName": event.tenant,
        "Tags": tags,
        "x_RequestId": event.id,
        "x_ParentId": event.parent_id,
        "x_Action": event.action,
        "x_CounterfactualBasis": event.counterfactual_basis,
        "x_Estimated": "true" if event.estimated else "false",
    }
    rows: list[tuple[Cell, ...]] = []
    for number, unit in enumerate(units(event)):
        cost = usd(unit.nanos)
        price = _unit_price(unit) if unit.meter != "Tokens" else None
        row: dict[str, Cell] = {
            **common,
            "BilledCost": cost,
            "ChargeDescription": f"{unit.meter} of {event.model} ({event.action})",
            "ConsumedQuantity": unit.quantity,
            "ConsumedUnit": unit.unit,
            "ContractedCost": cost,
            "ContractedUnitPrice": price,
            "EffectiveCost": cost,
            "ListCost": cost,
            "ListUnitPrice": price,
            "PricingQuantity": unit.quantity,
            "PricingUnit": unit.unit,
            "SkuMeter": unit.meter,
            "SkuPriceId": f"{sku}:{unit.meter.lower().replace(' ', '-')}",
        }
        if number == 0:
            row["x_CounterfactualCostUSD"] = usd(event.counterfactual_nanos)
            row["x_SavingUSD"] = usd(event.saving_nanos)
        rows.append(_ordered(row))
    return rows


def _unit_price(unit: Unit) -> str | None:
    """USD per unit to 15 places, rounded half to even, trailing zeros dropped (None for no quantity: no
    price can be read off it). Exact: integers in units of 10⁻¹⁵ USD."""
    if unit.quantity <= 0:
        return None
    scale = 10**UNIT_PRICE_PLACES // NANOS_PER_USD
    whole, rest = divmod(abs(unit.nanos) * scale, unit.quantity)
    if 2 * rest > unit.quantity or (2 * rest == unit.quantity and whole % 2):
        whole += 1
    if not whole:
        return "0"
    dollars, fraction = divmod(whole, 10**UNIT_PRICE_PLACES)
    digits = f"{fraction:0{UNIT_PRICE_PLACES}d}".rstrip("0")
    sign = "-" if unit.nanos < 0 else ""
    return f"{sign}{dollars}.{digits}" if digits else f"{sign}{dollars}"


def _tool_uses(text: str | None) -> dict[str, int]:
    """``web_search=50;code_interpreter=2`` → by kind."""
    found: dict[str, int] = {}
    for item in (text or "").split(";"):
        kind, _, count = item.partition("=")
        if kind and count.isdigit():
            found[kind] = found.get(kind, 0) + int(count)
    return found


def _second(seconds: int) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _ordered(values: Mapping[str, Cell]) -> tuple[Cell, ...]:
    return tuple(values.get(column) for column in FOCUS_COLUMNS)


def _next_month(month: str) -> str:
    year, number = int(month[:4]), int(month[5:7])
    year, number = (year + 1, 1) if number == 12 else (year, number + 1)
    return f"{year:04d}-{number:02d}-01T00:00:00Z"


async def focus_values(events: AsyncIterator[CostEvent]) -> AsyncIterator[Sequence[Cell]]:
    async for event in events:
        for row in focus_rows(event):
            yield row
