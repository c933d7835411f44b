"""Server-side tools: what a request offers (per API), what an answer reports, what they cost, what a
budget holds for them, a tenant's allowance, and their prices in the config file."""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from gateway.base.errors import InvalidRequest
from gateway.base.money import usd
from gateway.base.types import Usage
from gateway.config.loading import ConfigError, parse_config
from gateway.config.schema.root import ModelConfig, ModelPricing, PriceTier, TenantConfig
from gateway.core.metering import held_tool_nanos, max_cost_nanos
from gateway.ledger import CostEvent
from gateway.money.pricing import price
from gateway.servertools.allowance import check_allowed
from gateway.servertools.kinds import parse_uses_text, tool_uses, uses_text
from gateway.servertools.reported import anthropic_uses, block_uses, item_uses, most, response_uses
from gateway.servertools.requested import (
    NO_TOOLS,
    RequestedTools,
    chat_tools,
    messages_tools,
    responses_tools,
)

SONNET = ModelPricing(
    input=Decimal(3),
    cached_input=Decimal("0.30"),
    output=Decimal(15),
    per_use={"web_search": Decimal("0.01"), "web_fetch": Decimal(0)},
)
GPT = ModelPricing(
    input=Decimal("2.50"),
    output=Decimal(15),
    per_use={
        "web_search": Decimal("0.01"),
        "file_search": Decimal("0.0025"),
        "code_interpreter": Decimal("0.03"),
    },
)


# --- pricing --------------------------------------------------------------------------------------------


def test_fifty_searches_bill_fifty_times_the_price_on_top_of_the_tokens() -> None:
    tokens = price(Usage(input_tokens=1000, output_tokens=100), SONNET)
    searched = price(Usage(input_tokens=1000, output_tokens=100, tool_uses=(("web_search", 50),)), SONNET)
    assert searched.tool_nanos == 50 * 10_000_000  # $0.01 a search
    assert usd(searched.tool_nanos) == "0.500000000"
    assert searched.total_nanos == tokens.total_nanos + 500_000_000
    assert searched.unpriced_tools == ()


def test_tool_prices_ignore_tiers_and_free_kinds_cost_nothing() -> None:
    tiered = GPT.model_copy(update={"tiers": (PriceTier(above_input_tokens=10, input_multiplier=2),)})
    uses = (("code_interpreter", 2), ("file_search", 4), ("web_search", 3))
    cost = price(Usage(input_tokens=100, tool_uses=uses), tiered)
    assert cost.tier == 0
    assert cost.tool_nanos == 2 * 30_000_000 + 4 * 2_500_000 + 3 * 10_000_000
    assert price(Usage(tool_uses=(("web_fetch", 9),)), SONNET).total_nanos == 0


def test_a_kind_without_a_price_is_billed_nothing_and_named() -> None:
    cost = price(Usage(tool_uses=(("image_generation", 2), ("web_search", 1))), SONNET)
    assert cost.tool_nanos == 10_000_000
    assert cost.unpriced_tools == ("image_generation",)


def test_negative_tool_uses_are_refused() -> None:
    with pytest.raises(ValueError, match="tool_uses"):
        price(Usage(tool_uses=(("web_search", -1),)), SONNET)


# --- what a request offers ------------------------------------------------------------------------------


def test_chat_web_search_options_is_one_search() -> None:
    assert chat_tools({"messages": []}) is NO_TOOLS
    found = chat_tools({"web_search_options": {}})
    assert found.kinds == ("web_search",) and found.held == (("web_search", 1),)
    assert found.sent == (("web_search", "web_search_options"),)


def test_messages_tools_are_held_at_their_max_uses_else_the_default() -> None:
    body = {
        "tools": [
            {"type": "web_search_20250305", "name": "web_search", "max_uses": 5},
            {"type": "web_search_20260209", "name": "web_search_2"},
            {"type": "web_fetch_20250910", "name": "web_fetch", "max_uses": 2},
            {"name": "get_weather", "input_schema": {"type": "object"}},
            {"type": "bash_20250124", "name": "bash"},
        ],
        "mcp_servers": [{"type": "url", "url": "https://mcp.test", "name": "m"}],
    }
    found = messages_tools(body, default_uses=7)
    assert found.kinds == ("mcp", "web_fetch", "web_search")
    assert found.held == (("mcp", 7), ("web_fetch", 2), ("web_search", 12))
    assert found.total is None
    assert ("web_search", "web_search_20260209") in found.sent and ("mcp", "mcp_servers") in found.sent
    assert messages_tools({"tools": [{"name": "f", "input_schema": {}}]}, default_uses=7) is NO_TOOLS


def test_responses_tools_are_capped_together_by_max_tool_calls() -> None:
    tools = [
        {"type": "web_search"},
        {"type": "file_search", "vector_store_ids": ["vs_1"]},
        {"type": "function"},
    ]
    capped = responses_tools({"tools": tools, "max_tool_calls": 4}, default_uses=20)
    assert capped.kinds == ("file_search", "web_search")
    assert capped.held == (("file_search", 4), ("web_search", 4)) and capped.total == 4
    uncapped = responses_tools({"tools": [{"type": "web_search_preview_2025_03_11"}]}, default_uses=20)
    assert uncapped.held == (("web_search", 20),) and uncapped.total is None
    assert responses_tools({"tools": [{"type": "function", "name": "f"}]}, default_uses=20) is NO_TOOLS
    assert responses_tools({"tools": "web_search"}, default_uses=20) is NO_TOOLS


# --- what an answer reports ----------------------------------------------------------------------------


def test_anthropic_usage_counts_every_requests_field() -> None:
    usage = {"server_tool_use": {"web_search_requests": 50, "web_fetch_requests": 2, "other": 3}}
    assert anthropic_uses(usage) == (("web_fetch", 2), ("web_search", 50))
    assert anthropic_uses({"server_tool_use": {"web_search_requests": 0}}) == ()
    assert anthropic_uses({"server_tool_use": None}) == ()
    assert anthropic_uses({"server_tool_use": {"code_execution_requests": 1}}) == (("code_execution", 1),)


def test_server_tool_use_blocks_count_billed_tools_only() -> None:
    blocks = [
        {"type": "server_tool_use", "name": "web_search"},
        {"type": "server_tool_use", "name": "web_search"},
        {"type": "server_tool_use", "name": "bash_code_execution"},
        {"type": "tool_use", "name": "web_search"},
    ]
    assert block_uses(blocks) == (("web_search", 2),)


def test_responses_output_items_count_calls_and_containers() -> None:
    response = {
        "output": [
            {"type": "web_search_call", "id": "ws_1", "status": "completed"},
            {"type": "web_search_call", "id": "ws_2", "status": "completed"},
            {"type": "file_search_call", "id": "fs_1"},
            {"type": "code_interpreter_call", "id": "ci_1", "container_id": "cntr_a"},
            {"type": "code_interpreter_call", "id": "ci_2", "container_id": "cntr_a"},
            {"type": "code_interpreter_call", "id": "ci_3", "container_id": "cntr_b"},
            {"type": "image_generation_call", "id": "ig_1"},
            {"type": "function_call", "id": "fc_1"},
            {"type": "message", "id": "msg_1", "content": []},
        ]
    }
    assert response_uses(response) == (
        ("code_interpreter", 2),
        ("file_search", 1),
        ("image_generation", 1),
        ("web_search", 2),
    )
    assert response_uses({"output": None}) == () and response_uses(None) == ()
    assert item_uses([{"type": "code_interpreter_call", "id": "x"}, "junk"]) == (("code_interpreter", 1),)


def test_most_keeps_the_larger_count_of_each_kind() -> None:
    assert most((("web_search", 3),), (("file_search", 1), ("web_search", 2))) == (
        ("file_search", 1),
        ("web_search", 3),
    )


def test_uses_text_round_trips() -> None:
    uses = tool_uses({"web_search": 50, "file_search": 2, "web_fetch": 0})
    assert uses_text(uses) == "file_search=2;web_search=50"
    assert parse_uses_text(uses_text(uses)) == uses
    assert uses_text(()) is None and parse_uses_text(None) == () and parse_uses_text("x=;=3;y=z") == ()


def test_old_events_without_tool_fields_stay_readable() -> None:
    old = b'{"id": "r1", "time_ms": 1, "tenant": "t", "key_id": "k", "requested_model": "m", "model": "m",'
    old += b' "provider": "p", "action": "forward", "cost_nanos": 5}'
    event = CostEvent.from_json(old)
    assert event.tool_uses is None and event.tool_cost_nanos == 0
    priced = replace(event, tool_uses="web_search=2", tool_cost_nanos=20_000_000)
    assert CostEvent.from_json(priced.to_json()) == priced
    with pytest.raises(TypeError):
        replace(event, tool_cost_nanos=0.5)


# --- the budget hold ------------------------------------------------------------------------------------


def test_hold_is_max_uses_times_the_price() -> None:
    tools = messages_tools(
        {"tools": [{"type": "web_search_20250305", "name": "web_search", "max_uses": 50}]}, default_uses=20
    )
    assert held_tool_nanos(SONNET, tools) == 500_000_000
    model = ModelConfig(provider="p", pricing=SONNET)
    body = {"max_tokens": 100}
    without = max_cost_nanos(model, 1000, body)
    assert max_cost_nanos(model, 1000, body, tools=tools) == without + 500_000_000


def test_hold_under_max_tool_calls_is_that_many_of_the_dearest_kind() -> None:
    tools = responses_tools(
        {"tools": [{"type": "web_search"}, {"type": "file_search"}], "max_tool_calls": 3}, default_uses=20
    )
    assert held_tool_nanos(GPT, tools) == 3 * 10_000_000
    uncapped = responses_tools({"tools": [{"type": "web_search"}, {"type": "file_search"}]}, default_uses=20)
    assert held_tool_nanos(GPT, uncapped) == 20 * 10_000_000 + 20 * 2_500_000
    assert held_tool_nanos(SONNET, RequestedTools(("mcp",), (("mcp", 9),))) == 0


# --- the tenant's allowance -----------------------------------------------------------------------------


def _tenant(server_tools: Any) -> TenantConfig:
    return TenantConfig(keys=("sk-x",), server_tools=server_tools)


def test_allowance_refuses_kinds_not_listed_naming_the_type() -> None:
    tools = messages_tools({"tools": [{"type": "web_search_20250305", "name": "web_search"}]}, default_uses=1)
    check_allowed(_tenant(True), tools)
    check_allowed(_tenant(["web_search"]), tools)
    check_allowed(_tenant(False), NO_TOOLS)
    check_allowed(None, tools)
    for refusing in (False, ["web_fetch"]):
        with pytest.raises(InvalidRequest) as caught:
            check_allowed(_tenant(refusing), tools)
        assert caught.value.code == "server_tool_not_allowed" and caught.value.param == "tools"
        assert "'web_search_20250305' (web_search)" in str(caught.value)


def test_allowance_shortens_a_long_type_in_its_message() -> None:
    tools = responses_tools({"tools": [{"type": "web_search_" + "x" * 10_000}]}, default_uses=1)
    with pytest.raises(InvalidRequest) as caught:
        check_allowed(_tenant(False), tools)
    assert len(str(caught.value)) < 400


# --- the config file ------------------------------------------------------------------------------------

PRICED = """\
providers: {p: {base_url: http://x}}
models:
  m:
    provider: p
    pricing:
      input: 1
      output: 2
      per_use: {web_search: %s}
tenants:
  t:
    keys: [sk-t]
    server_tools: %s
limits: {held_tool_uses: %s}
"""


def test_per_use_prices_allowance_and_cap_are_read() -> None:
    config = parse_config(PRICED % ("0.01", "[web_search, file_search]", "5"), Path("g.yaml"), {})
    pricing = config.models["m"].pricing
    assert pricing is not None and pricing.per_use == {"web_search": Decimal("0.01")}
    assert config.tenants["t"].server_tools == ("web_search", "file_search")
    assert config.limits.held_tool_uses == 5
    assert parse_config(PRICED % ("0", "false", "0"), Path("g.yaml"), {}).tenants["t"].server_tools is False


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        (("-1", "true", "5"), "g.yaml:8: models.m.pricing.per_use.web_search"),
        (("0.0000000001", "true", "5"), "g.yaml:8: models.m.pricing.per_use.web_search"),
        (("0.01", "[web_serch]", "5"), "g.yaml:12: tenants.t.server_tools"),
        (("0.01", "true", "-1"), "g.yaml:13: limits.held_tool_uses"),
    ],
)
def test_bad_tool_settings_name_file_and_line(values: tuple[str, str, str], expected: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(PRICED % values, Path("g.yaml"), {})
    assert any(problem.startswith(expected) for problem in caught.value.problems), caught.value.problems
