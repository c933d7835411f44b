"""price(): integer nano-dollars, cached tokens, whole-request and marginal tiers, rounding, edges."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from gateway.base.money import usd
from gateway.base.types import Usage
from gateway.config.schema.root import ModelPricing, PriceTier
from gateway.money.pricing import (
    Cost,
    applicable_tier,
    nanos_per_token,
    price,
    price_at_tier,
    usage_from_openai,
)

GPT_5_4 = ModelPricing(
    input=Decimal("2.50"),
    cached_input=Decimal("0.25"),
    output=Decimal("15.00"),
    tiers=(
        PriceTier(
            above_input_tokens=272_000,
            input_multiplier=Decimal(2),
            cached_input_multiplier=Decimal(2),
            output_multiplier=Decimal("1.5"),
        ),
    ),
)
GPT_5_4_PRO = ModelPricing(
    input=Decimal(30),
    output=Decimal(180),
    tiers=(
        PriceTier(above_input_tokens=272_000, input_multiplier=Decimal(2), output_multiplier=Decimal("1.5")),
    ),
)
MARGINAL = ModelPricing(
    input=Decimal("1.25"),
    cached_input=Decimal("0.125"),
    output=Decimal(10),
    tiers=(
        PriceTier(
            above_input_tokens=200_000,
            input_multiplier=Decimal(2),
            cached_input_multiplier=Decimal(2),
            output_multiplier=Decimal("1.5"),
            scope="marginal",
        ),
    ),
)
MARGINAL_NO_CACHE_PRICE = MARGINAL.model_copy(update={"cached_input": None})
UNTIERED = ModelPricing(input=Decimal("0.15"), cached_input=Decimal("0.075"), output=Decimal("0.60"))
BRACKETS = ModelPricing(
    input=Decimal("0.001"),
    output=Decimal(0),
    tiers=(
        PriceTier(above_input_tokens=100, input_multiplier=Decimal(2), scope="marginal"),
        PriceTier(above_input_tokens=200, input_multiplier=Decimal(3), scope="marginal"),
    ),
)
MIXED = ModelPricing(
    input=Decimal("0.001"),
    output=Decimal(0),
    tiers=(
        PriceTier(above_input_tokens=100, input_multiplier=Decimal(2)),
        PriceTier(above_input_tokens=200, input_multiplier=Decimal(3), scope="marginal"),
    ),
)


def halves(multiplier: str) -> ModelPricing:
    return ModelPricing(
        input=Decimal("0.001"),
        output=Decimal("0.001"),
        tiers=(PriceTier(above_input_tokens=10, input_multiplier=Decimal(multiplier)),),
    )


@pytest.mark.parametrize(
    ("pricing", "usage", "expected"),
    [
        # the worked example: 271K in + 4K out = $0.7375; 273K in + 4K out = $1.455
        (GPT_5_4, Usage(271_000, 0, 4_000), Cost(737_500_000, 677_500_000, 0, 60_000_000, None, False)),
        (GPT_5_4, Usage(273_000, 0, 4_000), Cost(1_455_000_000, 1_365_000_000, 0, 90_000_000, 0, False)),
        # the line itself is not above the line
        (GPT_5_4, Usage(271_999, 0, 0), Cost(679_997_500, 679_997_500, 0, 0, None, False)),
        (GPT_5_4, Usage(272_000, 0, 0), Cost(680_000_000, 680_000_000, 0, 0, None, False)),
        (GPT_5_4, Usage(272_001, 0, 0), Cost(1_360_005_000, 1_360_005_000, 0, 0, 0, False)),
        # cached tokens are part of input_tokens, on both sides of the line
        (
            GPT_5_4,
            Usage(271_999, 200_000, 1_000),
            Cost(244_997_500, 179_997_500, 50_000_000, 15_000_000, None, False),
        ),
        (
            GPT_5_4,
            Usage(272_001, 200_000, 1_000),
            Cost(482_505_000, 360_005_000, 100_000_000, 22_500_000, 0, False),
        ),
        # zero tokens, output only
        (GPT_5_4, Usage(0, 0, 0), Cost(0, 0, 0, 0, None, False)),
        (GPT_5_4, Usage(0, 0, 1_000), Cost(15_000_000, 0, 0, 15_000_000, None, False)),
        # reasoning tokens are inside output tokens: not billed twice
        (
            GPT_5_4,
            Usage(1_000, 0, 1_000, reasoning_tokens=800),
            Cost(17_500_000, 2_500_000, 0, 15_000_000, None, False),
        ),
        # the estimated flag passes through
        (UNTIERED, Usage(1_000, 500, 100, estimated=True), Cost(172_500, 75_000, 37_500, 60_000, None, True)),
        # cached above input is clamped to input
        (UNTIERED, Usage(100, 150, 0), Cost(7_500, 0, 7_500, 0, None, False)),
        # no cached price: cached tokens cost the input price, and take the input multiplier
        (
            GPT_5_4_PRO,
            Usage(300_000, 100_000, 1_000),
            Cost(18_270_000_000, 12_000_000_000, 6_000_000_000, 270_000_000, 0, False),
        ),
        (
            GPT_5_4_PRO,
            Usage(272_000, 100_000, 0),
            Cost(8_160_000_000, 5_160_000_000, 3_000_000_000, 0, None, False),
        ),
        # marginal: only tokens above the line are multiplied; output too once the line is crossed
        (MARGINAL, Usage(250_000, 0, 1_000), Cost(390_000_000, 375_000_000, 0, 15_000_000, 0, False)),
        (MARGINAL, Usage(200_000, 0, 1_000), Cost(260_000_000, 250_000_000, 0, 10_000_000, None, False)),
        # marginal with cached tokens as the prompt's prefix: 200K cached below, 20K cached + 30K above
        (MARGINAL, Usage(250_000, 220_000, 0), Cost(105_000_000, 75_000_000, 30_000_000, 0, 0, False)),
        (MARGINAL, Usage(250_000, 100_000, 0), Cost(262_500_000, 250_000_000, 12_500_000, 0, 0, False)),
        (
            MARGINAL_NO_CACHE_PRICE,
            Usage(250_000, 220_000, 0),
            Cost(375_000_000, 75_000_000, 300_000_000, 0, 0, False),
        ),
        # several marginal tiers stack like brackets; a whole-request tier below a marginal one
        (BRACKETS, Usage(300, 0, 0), Cost(600, 600, 0, 0, 1, False)),
        (BRACKETS, Usage(150, 0, 0), Cost(200, 200, 0, 0, 0, False)),
        (MIXED, Usage(300, 0, 0), Cost(700, 700, 0, 0, 1, False)),
        # a fractional line rounds half to even, once per line
        (halves("1.5"), Usage(11, 0, 0), Cost(16, 16, 0, 0, 0, False)),
        (halves("1.5"), Usage(13, 0, 0), Cost(20, 20, 0, 0, 0, False)),
        (halves("1.001"), Usage(11, 0, 3), Cost(14, 11, 0, 3, 0, False)),
    ],
)
def test_price_table(pricing: ModelPricing, usage: Usage, expected: Cost) -> None:
    cost = price(usage, pricing)
    assert cost == expected
    assert cost.total_nanos == cost.input_nanos + cost.cached_input_nanos + cost.output_nanos


def test_price_worked_example_in_usd() -> None:
    assert usd(price(Usage(271_000, 0, 4_000), GPT_5_4).total_nanos) == "0.737500000"
    assert usd(price(Usage(273_000, 0, 4_000), GPT_5_4).total_nanos) == "1.455000000"


@pytest.mark.parametrize(
    ("pricing", "usage", "tier", "total"),
    [
        (GPT_5_4, Usage(1_000, 0, 1_000), 0, 5_000_000 + 22_500_000),
        (GPT_5_4, Usage(300_000, 0, 0), None, 750_000_000),
        (MARGINAL, Usage(1_000, 0, 1_000), 0, 1_250_000 + 10_000_000),
    ],
)
def test_price_at_tier_projects(pricing: ModelPricing, usage: Usage, tier: int | None, total: int) -> None:
    cost = price_at_tier(usage, pricing, tier)
    assert (cost.total_nanos, cost.tier) == (total, tier)


@pytest.mark.parametrize(
    "usage",
    [Usage(-1, 0, 0), Usage(0, -1, 0), Usage(0, 0, -1), Usage(0, 0, 0, reasoning_tokens=-1)],
)
def test_price_rejects_negative_usage(usage: Usage) -> None:
    with pytest.raises(ValueError, match="negative"):
        price(usage, GPT_5_4)


@pytest.mark.parametrize("tier", [1, -1])
def test_price_at_tier_rejects_unknown_tier(tier: int) -> None:
    with pytest.raises(ValueError, match="no tier"):
        price_at_tier(Usage(1, 0, 0), GPT_5_4, tier)


@pytest.mark.parametrize(
    ("input_tokens", "tier"), [(0, None), (100, None), (101, 0), (200, 0), (201, 1), (10**9, 1)]
)
def test_price_applicable_tier(input_tokens: int, tier: int | None) -> None:
    assert applicable_tier(input_tokens, BRACKETS.tiers) == tier


@pytest.mark.parametrize(
    ("usd", "nanos"),
    [("2.50", 2_500), ("0.075", 75), ("0.001", 1), ("0", 0), ("180", 180_000), ("1234.567", 1_234_567)],
)
def test_price_nanos_per_token(usd: str, nanos: int) -> None:
    assert nanos_per_token(Decimal(usd)) == nanos


@pytest.mark.parametrize("usd", ["0.0001", "-1"])
def test_price_nanos_per_token_rejects_inexact(usd: str) -> None:
    with pytest.raises(ValueError, match="nano-dollars"):
        nanos_per_token(Decimal(usd))


@pytest.mark.parametrize(
    ("nanos", "text"),
    [
        (737_500_000, "0.737500000"),
        (1_455_000_000, "1.455000000"),
        (0, "0.000000000"),
        (1, "0.000000001"),
        (-5, "-0.000000005"),
        (12_345_678_901_234, "12345.678901234"),
    ],
)
def test_price_usd(nanos: int, text: str) -> None:
    assert usd(nanos) == text
    assert Decimal(text) * 1_000_000_000 == nanos


@pytest.mark.parametrize(
    ("payload", "usage"),
    [
        (
            {
                "prompt_tokens": 1200,
                "completion_tokens": 300,
                "total_tokens": 1500,
                "prompt_tokens_details": {"cached_tokens": 1024},
                "completion_tokens_details": {"reasoning_tokens": 128},
            },
            Usage(1200, 1024, 300, 128),
        ),
        (
            {
                "input_tokens": 900,
                "output_tokens": 50,
                "input_tokens_details": {"cached_tokens": 512},
                "output_tokens_details": {"reasoning_tokens": 10},
            },
            Usage(900, 512, 50, 10),
        ),
        ({"prompt_tokens": 8, "total_tokens": 8}, Usage(8, 0, 0, 0)),
        ({"prompt_tokens": 5, "completion_tokens": 1, "prompt_tokens_details": None}, Usage(5, 0, 1, 0)),
        ({"input_tokens": 5, "output_tokens": True}, Usage(5, 0, 0, 0)),
    ],
)
def test_price_usage_from_openai(payload: dict[str, Any], usage: Usage) -> None:
    assert usage_from_openai(payload) == usage


def test_price_usage_from_openai_then_price() -> None:
    usage = usage_from_openai({"prompt_tokens": 273_000, "completion_tokens": 4_000})
    assert usage is not None
    assert price(usage, GPT_5_4).total_nanos == 1_455_000_000
