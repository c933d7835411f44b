"""Anthropic's usage object read into the gateway's ``Usage``: input includes cache reads and writes."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.base.types import Usage
from gateway.money.anthropic_usage import usage_from_anthropic


def test_usage_adds_cache_reads_and_writes_to_the_input() -> None:
    usage = usage_from_anthropic(
        {
            "input_tokens": 12,
            "cache_read_input_tokens": 150_000,
            "cache_creation_input_tokens": 3_000,
            "cache_creation": {"ephemeral_5m_input_tokens": 2_000, "ephemeral_1h_input_tokens": 1_000},
            "output_tokens": 640,
            "service_tier": "standard",
            "server_tool_use": {"web_search_requests": 1},
        }
    )
    assert usage == Usage(
        input_tokens=153_012,
        cached_input_tokens=150_000,
        output_tokens=640,
        cache_write_tokens=3_000,
        cache_write_1h_tokens=1_000,
        tool_uses=(("web_search", 1),),  # billed per search, on top of the tokens
    )


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ({"input_tokens": 5, "output_tokens": 1}, Usage(input_tokens=5, output_tokens=1)),
        # writes without the split by TTL: all of them for 5 minutes
        (
            {"input_tokens": 5, "cache_creation_input_tokens": 2_048},
            Usage(input_tokens=2_053, cache_write_tokens=2_048),
        ),
        # only the split: the split is the total
        (
            {"input_tokens": 1, "cache_creation": {"ephemeral_1h_input_tokens": 4_096}},
            Usage(input_tokens=4_097, cache_write_tokens=4_096, cache_write_1h_tokens=4_096),
        ),
        # a stream's message_start: output not yet known, cache fields null
        (
            {"input_tokens": 9, "cache_read_input_tokens": None, "output_tokens": 1},
            Usage(input_tokens=9, output_tokens=1),
        ),
        # negative, boolean, fractional and text values count nothing
        (
            {"input_tokens": -3, "cache_read_input_tokens": True, "output_tokens": 2.5, "x": "1"},
            Usage(),
        ),
        (
            {"cache_creation": "bad", "cache_read_input_tokens": 7},
            Usage(input_tokens=7, cached_input_tokens=7),
        ),
        ({}, Usage()),
    ],
)
def test_usage_edges(raw: dict[str, Any], expected: Usage) -> None:
    assert usage_from_anthropic(raw) == expected
