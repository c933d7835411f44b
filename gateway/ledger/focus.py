"""Cost events as FinOps FOCUS 1.2 rows, for tools that ingest FOCUS unchanged.

One usage row per cost event, and one credit row per event whose saving is not zero:

- usage: ``BilledCost`` = ``EffectiveCost`` = ``ContractedCost`` = what the call cost; ``ListCost`` = what
  forwarding the client's request unchanged would have cost (the counterfactual), so the usual FinOps
  savings figure, ``ListCost - EffectiveCost``, is the gateway's saving; ``ConsumedQuantity`` and
  ``PricingQuantity`` are the call's tokens (input and output) in ``Tokens``; ``ResourceId`` the model
  that answered; ``SubAccountId`` the tenant.
- credit: the saving on its own line (``ChargeCategory`` ``Credit``) for tools that list credits, with
  every cost column 0 (no money moved: a saving is spend avoided, not a refund) and the amount in
  ``x_SavingUSD``, so that summing ``BilledCost`` or ``EffectiveCost`` over all rows still gives the bill.

``Tags`` is a JSON object: tenant, action, the context bucket of the input, and the request id; columns
prefixed ``x_`` are the gateway's own (FOCUS allows custom columns with that prefix): among them
``x_ToolUses`` and ``x_ToolCostUSD``, the server-side tool uses (``web_search=50``) and their part of the
usage row's cost.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence

import orjson

from gateway.ledger.event import CostEvent
from gateway.ledger.period import iso_time, month_of
from gateway.money import usd
from gateway.sampling.buckets import bucket_index, buckets_for
from gateway.sampling.config import DEFAULT_BUCKET_EDGES

FOCUS_COLUMNS = (
    "BilledCost", "BillingAccountId", "BillingCurrency", "BillingPeriodStart", "BillingPeriodEnd",
    "ChargeCategory", "ChargeClass", "ChargeDescription", "ChargeFrequency", "ChargePeriodStart",
    "ChargePeriodEnd", "ConsumedQuantity", "ConsumedUnit", "ContractedCost", "EffectiveCost",
    "InvoiceIssuerName", "ListCost", "PricingCategory", "PricingQuantity", "PricingUnit", "ProviderName",
    "PublisherName", "ResourceId", "ResourceName", "ResourceType", "ServiceCategory", "ServiceName",
    "SkuId", "SubAccountId", "SubAccountName", "Tags", "x_RequestId", "x_ParentId", "x_Action",
    "x_CounterfactualBasis", "x_Estimated", "x_SavingUSD", "x_ToolUses", "x_ToolCostUSD",
)  # fmt: skip
ACCOUNT = "llm-cost-gateway"
ZERO = usd(0)
_BUCKETS = buckets_for(DEFAULT_BUCKET_EDGES)

Cell = str | int | None


def bucket_of(tokens: int) -> str:
    return _BUCKETS[bucket_index(tokens, DEFAULT_BUCKET_EDGES)].label


def focus_rows(event: CostEvent) -> list[tuple[Cell, ...]]:
    """The usage row of ``event`` and, when it saved or cost something against forwarding unchanged, its
    credit row, in ``FOCUS_COLUMNS`` order."""
    month = month_of(event.time_ms)
    start, end = iso_time(event.time_ms), iso_time(event.time_ms + max(1, event.latency_ms))
    tags = orjson.dumps(
        {
            "tenant": event.tenant,
            "action": event.action,
            "bucket": bucket_of(event.input_tokens),
            "request_id": event.parent_id or event.id,
        }
    ).decode()
    tokens = event.input_tokens + event.output_tokens
    cost = usd(event.cost_nanos)
    common = {
        "BillingAccountId": ACCOUNT,
        "BillingCurrency": "USD",
        "BillingPeriodStart": f"{month}-01T00:00:00.000Z",
        "BillingPeriodEnd": _next_month(month),
        "ChargeFrequency": "Usage-Based",
        "ChargePeriodStart": start,
        "ChargePeriodEnd": end,
        "InvoiceIssuerName": event.provider,
        "ProviderName": event.provider,
        "PublisherName": event.provider,
        "ResourceId": event.model,
        "ResourceName": event.model,
        "ResourceType": "Model",
        "ServiceCategory": "AI and Machine Learning",
        "ServiceName": "LLM inference",
        "SkuId": f"{event.model}:{event.tier or 'standard'}",
        "SubAccountId": event.tenant,
        "SubAccountName": event.tenant,
        "Tags": tags,
        "x_RequestId": event.id,
        "x_ParentId": event.parent_id,
        "x_Action": event.action,
        "x_CounterfactualBasis": event.counterfactual_basis,
        "x_Estimated": "true" if event.estimated else "false",
    }
    usage = {
        **common,
        "BilledCost": cost,
        "ChargeCategory": "Usage",
        "ChargeDescription": f"{event.action} call to {event.model}",
        "ConsumedQuantity": tokens,
        "ConsumedUnit": "Tokens",
        "ContractedCost": cost,
        "EffectiveCost": cost,
        "ListCost": usd(event.counterfactual_nanos),
        "PricingCategory": "Standard",
        "PricingQuantity": tokens,
        "PricingUnit": "Tokens",
        "x_SavingUSD": usd(event.saving_nanos),
        "x_ToolUses": event.tool_uses,
        "x_ToolCostUSD": usd(event.tool_cost_nanos),
    }
    rows = [_ordered(usage)]
    if event.saving_nanos:
        credit = {
            **common,
            "BilledCost": ZERO,
            "ChargeCategory": "Credit",
            "ChargeDescription": f"gateway saving by {event.action} against forwarding the request "
            f"unchanged (informational: spend avoided, in ListCost - EffectiveCost of {event.id})",
            "ContractedCost": ZERO,
            "EffectiveCost": ZERO,
            "ListCost": ZERO,
            "x_SavingUSD": usd(event.saving_nanos),
        }
        rows.append(_ordered(credit))
    return rows


def _ordered(values: Mapping[str, Cell]) -> tuple[Cell, ...]:
    return tuple(values.get(column) for column in FOCUS_COLUMNS)


def _next_month(month: str) -> str:
    year, number = int(month[:4]), int(month[5:7])
    year, number = (year + 1, 1) if number == 12 else (year, number + 1)
    return f"{year:04d}-{number:02d}-01T00:00:00.000Z"


async def focus_values(events: AsyncIterator[CostEvent]) -> AsyncIterator[Sequence[Cell]]:
    async for event in events:
        for row in focus_rows(event):
            yield row
