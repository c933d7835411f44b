"""Anthropic's prices through ``gateway.core.metering.cost_of``: cache reads at the cached-input price, writes
at 1.25x (5 minutes) and 2x (1 hour), and the whole-request long-context tier above 200K input tokens."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from gateway.base.money import usd
from gateway.base.types import Usage
from gateway.config.schema.root import GatewayConfig, ModelPricing
from gateway.core.metering import cost_of
from gateway.money.anthropic_usage import usage_from_anthropic
from gateway.money.pricing import price
from tests.factories import make_config

MODEL = "claude-sonnet-4"


def anthropic_config(**prompt_cache: Any) -> GatewayConfig:
    config = make_config()
    config["providers"]["anthropic"] = {
        "base_url": "https://api.anthropic.test/v1",
        "kind": "anthropic",
        "prompt_cache": {"granularity": 1, "write_multiplier": "1.25", **prompt_cache},
    }
    config["models"][MODEL] = {
        "provider": "anthropic",
        "context_window": 1_000_000,
        "pricing": {
            "input": "3.00",
            "cached_input": "0.30",
            "output": "15.00",
            "tiers": [
                {
                    "above_input_tokens": 200_000,
                    "input_multiplier": 2,
                    "cached_input_multiplier": 2,
                    "output_multiplier": "1.5",
                    "scope": "whole_request",
                }
            ],
        },
    }
    return GatewayConfig.model_validate(config)


def answer(read: int) -> dict[str, Any]:
    """An answer's usage: 1,000 new tokens, ``read`` read from the cache, 40K written for 5 minutes and
    20K for an hour, 2,000 out."""
    return {
        "input_tokens": 1_000,
        "cache_read_input_tokens": read,
        "cache_creation_input_tokens": 60_000,
        "cache_creation": {"ephemeral_5m_input_tokens": 40_000, "ephemeral_1h_input_tokens": 20_000},
        "output_tokens": 2_000,
    }


def test_anthropic_usage_priced_below_the_long_context_line() -> None:
    cost = cost_of(usage_from_anthropic(answer(read=100_000)), anthropic_config(), MODEL)
    assert cost is not None and cost.tier is None
    # 1,000 x $3 + 40,000 x $3.75 + 20,000 x $6 (per million): the writes are input, at their premium
    assert usd(cost.input_nanos) == "0.273000000"
    assert usd(cost.cached_input_nanos) == "0.030000000"  # 100,000 reads x $0.30
    assert usd(cost.output_nanos) == "0.030000000"
    assert usd(cost.total_nanos) == "0.333000000"


def test_anthropic_usage_priced_above_the_long_context_line_as_a_whole_request() -> None:
    usage = usage_from_anthropic(answer(read=150_000))
    assert usage.input_tokens == 211_000  # the line counts reads and writes too
    cost = cost_of(usage, anthropic_config(), MODEL)
    assert cost is not None and cost.tier == 0
    # everything doubled: 1,000 x $6 + 40,000 x $7.50 + 20,000 x $12; reads 150,000 x $0.60; out x 1.5
    assert usd(cost.input_nanos) == "0.546000000"
    assert usd(cost.cached_input_nanos) == "0.090000000"
    assert usd(cost.output_nanos) == "0.045000000"
    assert usd(cost.total_nanos) == "0.681000000"


def test_anthropic_writes_without_a_write_multiplier_cost_the_input_price_but_an_hour_still_doubles() -> None:
    cost = cost_of(usage_from_anthropic(answer(read=0)), anthropic_config(write_multiplier="0"), MODEL)
    assert cost is not None
    assert usd(cost.input_nanos) == usd((1_000 + 40_000) * 3_000 + 20_000 * 6_000)


@pytest.mark.parametrize(
    ("usage", "nanos"),
    [
        (Usage(input_tokens=1_000, cache_write_tokens=1_000), 1_000 * 3_750),
        (Usage(input_tokens=1_000, cache_write_tokens=1_000, cache_write_1h_tokens=1_000), 1_000 * 6_000),
        # an hour's writes beyond the writes are clamped to them, the writes to the uncached input
        (
            Usage(input_tokens=1_000, cache_write_tokens=500, cache_write_1h_tokens=900),
            500 * 3_000 + 500 * 6_000,
        ),
        (
            Usage(input_tokens=1_000, cached_input_tokens=800, cache_write_tokens=1_000),
            200 * 3_750 + 800 * 300,
        ),
    ],
)
def test_price_of_writes_by_ttl(usage: Usage, nanos: int) -> None:
    pricing = ModelPricing(input=Decimal(3), cached_input=Decimal("0.3"), output=Decimal(15))
    assert price(usage, pricing, write_multiplier=Decimal("1.25")).total_nanos == nanos


def test_price_refuses_negative_hour_writes() -> None:
    pricing = ModelPricing(input=Decimal(3), output=Decimal(15))
    with pytest.raises(ValueError, match="cache_write_1h_tokens"):
        price(Usage(input_tokens=1, cache_write_1h_tokens=-1), pricing)
