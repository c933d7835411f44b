"""Tool definitions: the cookbook's overheads, checked rule by rule with a 1-token-per-character count
and against the cookbook's API-verified totals with the real encodings."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.config.schema.counting import CountingConfig
from gateway.tokens.counter import TokenCounter
from gateway.tokens.tools import CL100K_TOOLS, O200K_TOOLS, count_tools, overheads_for

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_current_weather",
        "description": "Get the current weather in a given location",
        "parameters": {
            "type": "object",
            "properties": {
                "location": {"type": "string", "description": "The city and state, e.g. San Francisco, CA"},
                "unit": {
                    "type": "string",
                    "description": "The unit of temperature to return",
                    "enum": ["celsius", "fahrenheit"],
                },
            },
            "required": ["location"],
        },
    },
}
WEATHER_MESSAGES = [
    {
        "role": "system",
        "content": "You are a helpful assistant that can answer to questions about the weather.",
    },
    {"role": "user", "content": "What's the weather like in San Francisco?"},
]


def chars(text: str) -> int:
    return len(text)


@pytest.fixture(scope="module")
def counter() -> TokenCounter:
    return TokenCounter.build(CountingConfig(), {})


@pytest.mark.parametrize(
    ("model", "total"), [("gpt-4o", 101), ("gpt-4o-mini", 101), ("gpt-4", 105), ("gpt-3.5-turbo", 105)]
)
def test_tools_cookbook_example_matches_the_api(counter: TokenCounter, model: str, total: int) -> None:
    # OpenAI's cookbook ("How to count tokens with tiktoken", section 7) checked these totals against the API.
    assert counter.count_chat(model, {"messages": WEATHER_MESSAGES, "tools": [WEATHER_TOOL]}).total == total


@pytest.mark.parametrize(
    ("definitions", "expected"),
    [
        ([], 0),
        ([{"type": "function", "function": {"name": "f"}}], 12 + 7 + len("f:")),
        ([{"type": "function", "function": {"name": "f", "description": "Do it."}}], 12 + 7 + len("f:Do it")),
        ([{"name": "f", "description": "x"}, {"name": "g"}], 12 + (7 + 3) + (7 + 2)),
        (
            [{"name": "f", "parameters": {"type": "object", "properties": {}}}],
            12 + 7 + 2,
        ),
        (
            [{"name": "f", "parameters": {"properties": {"a": {"type": "string", "description": "An a."}}}}],
            12 + 7 + 2 + 3 + 3 + len("a:string:An a"),
        ),
        (
            [{"name": "f", "parameters": {"properties": {"u": {"type": "string", "enum": ["c", "fa"]}}}}],
            12 + 7 + 2 + 3 + 3 + (-3 + (3 + 1) + (3 + 2)) + len("u:string:"),
        ),
        (
            [{"name": "f", "parameters": {"properties": {"n": {"type": "integer", "enum": [1, 20]}}}}],
            12 + 7 + 2 + 3 + 3 + (-3 + (3 + 1) + (3 + 2)) + len("n:integer:"),
        ),
        (
            [{"name": "f", "parameters": {"properties": {"v": {"type": ["string", "null"]}}}}],
            12 + 7 + 2 + 3 + 3 + len("v:string | null:"),
        ),
        (
            [{"name": "f", "parameters": {"properties": {"o": {"type": "object", "properties": {"k": {}}}}}}],
            12 + 7 + 2 + 3 + 3 + len("o:object:") + 3 + 3 + len("k::"),
        ),
        (
            [{"name": "f", "parameters": {"properties": {"l": {"type": "array", "items": {"enum": ["x"]}}}}}],
            12 + 7 + 2 + 3 + 3 + (-3 + 3 + 1) + len("l:array:"),
        ),
        (
            [{"type": "custom", "custom": {"name": "grep", "description": "Search"}}],
            12 + 7 + len("grep:Search"),
        ),
        (
            [{"name": "f", "parameters": {"properties": {"b": {"enum": [2**70]}}}}],
            12 + 7 + 2 + 3 + 3 + (-3 + 3 + len(str(2**70))) + len("b::"),
        ),
        ([{"type": "function", "function": {"description": "no name"}}, "junk", {"name": ""}], 0),
    ],
)
def test_tools_overheads_rule_by_rule(definitions: list[Any], expected: int) -> None:
    assert count_tools(definitions, chars, O200K_TOOLS) == expected


def test_tools_cl100k_costs_ten_per_function() -> None:
    definitions = [{"name": "f"}, {"name": "g"}]
    assert (
        count_tools(definitions, chars, CL100K_TOOLS) - count_tools(definitions, chars, O200K_TOOLS) == 2 * 3
    )


@pytest.mark.parametrize(
    ("encoding", "overheads"), [("o200k_base", O200K_TOOLS), ("cl100k_base", CL100K_TOOLS)]
)
def test_tools_overheads_by_encoding(encoding: str, overheads: object) -> None:
    assert overheads_for(encoding) is overheads


def test_tools_legacy_functions_count_like_tools(counter: TokenCounter) -> None:
    with_tools = counter.count_chat("gpt-4o", {"messages": WEATHER_MESSAGES, "tools": [WEATHER_TOOL]})
    legacy = counter.count_chat(
        "gpt-4o", {"messages": WEATHER_MESSAGES, "functions": [WEATHER_TOOL["function"]]}
    )
    assert legacy.tools == with_tools.tools > 0
