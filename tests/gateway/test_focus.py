"""The FOCUS 1.2 export read back: requests through the app (Messages with cache reads and writes, a chat
over the price tier), the ledger in a real Redis, ``GET /admin/costs?format=focus`` checked column by
column against the specification's types and allowed values, and unit by unit against the bill."""

from __future__ import annotations

import csv
import io
import re
import time
import uuid
from collections import defaultdict
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import respx
from starlette.testclient import TestClient

from gateway.ledger.event import CostEvent
from gateway.ledger.focus import FOCUS_COLUMNS, focus_rows
from tests.factories import ADMIN_KEY, TENANT_KEY, gateway_client
from tests.gateway.test_ledger_event import make_event
from tests.gateway.test_messages_pipeline import (
    ANTHROPIC_HEADERS,
    CLAUDE,
    USAGE,
    Upstream,
    config,
    create_body,
    events,
)

MOCK = "http://upstream.test/v1"
DATE_TIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z")
MANDATORY = (  # FOCUS 1.2 columns a dataset must have, non-null on every row
    "BilledCost", "BillingAccountId", "BillingCurrency", "BillingPeriodEnd", "BillingPeriodStart",
    "ChargeCategory", "ChargeDescription", "ChargePeriodEnd", "ChargePeriodStart", "ContractedCost",
    "EffectiveCost", "InvoiceIssuerName", "ListCost", "ProviderName", "PublisherName", "ServiceCategory",
    "ServiceName",
)  # fmt: skip
PRESENT = (  # FOCUS 1.2 columns that must be present (null allowed where the spec allows it)
    *MANDATORY, "BillingAccountName", "ChargeClass", "ChargeFrequency", "ConsumedQuantity", "ConsumedUnit",
    "ContractedUnitPrice", "ListUnitPrice", "PricingCategory", "PricingQuantity", "PricingUnit",
    "ResourceId", "ResourceName", "ResourceType", "ServiceSubcategory", "SkuId", "SkuMeter", "SkuPriceId",
    "SubAccountId", "SubAccountName", "Tags",
)  # fmt: skip
DECIMALS = (
    "BilledCost", "ContractedCost", "EffectiveCost", "ListCost", "ListUnitPrice", "ContractedUnitPrice",
    "ConsumedQuantity", "PricingQuantity", "x_SavingUSD", "x_CounterfactualCostUSD",
)  # fmt: skip
ALLOWED = {
    "ChargeCategory": {"Usage", "Purchase", "Tax", "Credit", "Adjustment"},
    "ChargeClass": {"", "Correction"},
    "ChargeFrequency": {"One-Time", "Recurring", "Usage-Based"},
    "PricingCategory": {"Standard", "Dynamic", "Committed", "Other"},
    "ServiceCategory": {"AI and Machine Learning"},
    "ServiceSubcategory": {"Generative AI"},
    "BillingCurrency": {"USD"},
}


@pytest.fixture
def tenant() -> str:
    return f"focus-{uuid.uuid4().hex[:10]}"  # the Redis is shared: a tenant per test


def chat_reply(request: httpx.Request) -> httpx.Response:
    body = orjson.loads(request.content)
    usage = {
        "prompt_tokens": 300_000,
        "completion_tokens": 40,
        "prompt_tokens_details": {"cached_tokens": 120_000},
    }
    return httpx.Response(
        200,
        json={
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "model": body["model"],
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
            ],
            "usage": usage,
        },
    )


def focus_export(client: TestClient, tenant: str) -> list[dict[str, str]]:
    answer = client.get(
        "/admin/costs",
        params={"tenant": tenant, "format": "focus"},
        headers={"authorization": f"Bearer {ADMIN_KEY}"},
    )
    assert answer.status_code == 200, answer.text
    return list(csv.DictReader(io.StringIO(answer.text)))


def test_focus_export_conforms_and_splits_each_call_into_its_priced_units(
    tmp_path: Path, redis_url: str, tenant: str
) -> None:
    router = respx.Router(assert_all_called=False)
    router.post(f"{CLAUDE}/messages").mock(side_effect=Upstream().messages)
    router.post(f"{MOCK}/chat/completions").mock(side_effect=chat_reply)
    settings = config(tenant)
    with gateway_client(tmp_path, redis_url, router, config=settings) as client:
        answer = client.post("/v1/messages", json=create_body(), headers=ANTHROPIC_HEADERS)
        assert answer.status_code == 200, answer.text
        chat = client.post(
            "/v1/chat/completions",
            json={"model": "gpt-5.4", "messages": [{"role": "user", "content": "hello"}]},
            headers={"authorization": f"Bearer {TENANT_KEY}"},
        )
        assert chat.status_code == 200, chat.text
        recorded = events(client, tenant, 2)
        deadline = time.monotonic() + 10
        rows = focus_export(client, tenant)
        while len({row["x_RequestId"] for row in rows}) < 2 and time.monotonic() < deadline:
            rows = focus_export(client, tenant)

    assert len(recorded) == 2
    header = list(rows[0])
    assert header == list(FOCUS_COLUMNS)
    assert all(column in header for column in PRESENT)
    for row in rows:
        for column in MANDATORY:
            assert row[column] != "", (column, row)
        for column, allowed in ALLOWED.items():
            assert row[column] in allowed, (column, row[column])
        for column in DECIMALS:
            if row[column] != "":
                Decimal(row[column])  # a decimal, never in exponent form
                assert "e" not in row[column].lower(), (column, row[column])
        for column in ("BillingPeriodStart", "BillingPeriodEnd", "ChargePeriodStart", "ChargePeriodEnd"):
            assert DATE_TIME.fullmatch(row[column]), (column, row[column])
        assert row["ChargePeriodStart"] < row["ChargePeriodEnd"]
        assert row["BillingPeriodStart"] <= row["ChargePeriodStart"] < row["BillingPeriodEnd"]
        assert row["ChargeCategory"] == "Usage"  # savings are not credits
        assert row["BilledCost"] == row["EffectiveCost"] == row["ListCost"] == row["ContractedCost"]
        tags = orjson.loads(row["Tags"])
        assert tags and all(key.startswith("gateway/") for key in tags)
        if row["ListUnitPrice"]:  # cost ÷ quantity is the unit's price
            quantity = Decimal(row["PricingQuantity"])
            assert abs(Decimal(row["ListUnitPrice"]) * quantity - Decimal(row["BilledCost"])) <= Decimal(
                "1e-9"
            )

    by_request: dict[str, list[dict[str, str]]] = defaultdict(list)
    for row in rows:
        by_request[row["x_RequestId"]].append(row)
    for event in recorded:
        mine = by_request[event["id"]]
        assert sum(Decimal(row["BilledCost"]) for row in mine) == Decimal(event["cost_usd"])
        assert sum(Decimal(row["x_SavingUSD"] or 0) for row in mine) == Decimal(event["saving_usd"])
        assert [row["x_CounterfactualCostUSD"] != "" for row in mine] == [True] + [False] * (len(mine) - 1)

    messages = next(e for e in recorded if e["model"] == "claude-sonnet-4-5")
    units = {row["SkuMeter"]: row for row in by_request[messages["id"]]}
    assert set(units) == {"Input Tokens", "Cached Input Tokens", "Cache Write Tokens", "Output Tokens"}
    assert int(units["Input Tokens"]["PricingQuantity"]) == USAGE["input_tokens"]
    assert int(units["Cached Input Tokens"]["PricingQuantity"]) == USAGE["cache_read_input_tokens"]
    assert int(units["Cache Write Tokens"]["PricingQuantity"]) == USAGE["cache_creation_input_tokens"]
    assert Decimal(units["Input Tokens"]["ListUnitPrice"]) == Decimal("0.000003")
    assert Decimal(units["Cached Input Tokens"]["ListUnitPrice"]) == Decimal("0.0000003")
    # 1,000 tokens written for 5 minutes at 1.25x and 2,000 for an hour at 2x the $3 input price
    assert Decimal(units["Cache Write Tokens"]["BilledCost"]) == Decimal("0.01575")
    assert Decimal(units["Output Tokens"]["ListUnitPrice"]) == Decimal("0.000015")

    tiered = next(e for e in recorded if e["model"] == "gpt-5.4")
    units = {row["SkuMeter"]: row for row in by_request[tiered["id"]]}
    assert units["Input Tokens"]["SkuId"].endswith(":tier0")  # over 272K: the whole request at 2x
    assert Decimal(units["Input Tokens"]["ListUnitPrice"]) == Decimal("0.000005")
    assert Decimal(units["Cached Input Tokens"]["ListUnitPrice"]) == Decimal("0.0000005")
    assert Decimal(units["Output Tokens"]["ListUnitPrice"]) == Decimal("0.0000225")


def test_an_event_from_before_the_units_were_recorded_gets_one_token_row_and_its_tool_row() -> None:
    event = make_event(3, tool_uses="web_search=4", tool_cost_nanos=40_000_000, cost_nanos=41_000_000)
    rows = [dict(zip(FOCUS_COLUMNS, row, strict=True)) for row in focus_rows(event)]
    assert [row["SkuMeter"] for row in rows] == ["Tokens", "web_search uses"]
    assert rows[0]["ListUnitPrice"] is None  # input and output together: no unit price
    assert (rows[1]["PricingQuantity"], rows[1]["ListUnitPrice"]) == (4, "0.01")
    assert sum(Decimal(str(row["BilledCost"])) for row in rows) == Decimal("0.041")


def test_a_negative_saving_stays_in_the_gateways_column_and_is_never_a_credit() -> None:
    event = CostEvent.from_json(
        make_event(4, cost_nanos=2_000_000, counterfactual_nanos=1_500_000, cost_parts=None).to_json()
    )
    rows: list[dict[str, Any]] = [dict(zip(FOCUS_COLUMNS, row, strict=True)) for row in focus_rows(event)]
    assert [row["ChargeCategory"] for row in rows] == ["Usage"]
    assert rows[0]["x_SavingUSD"] == "-0.000500000"
