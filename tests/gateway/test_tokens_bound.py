"""The byte-size bound: never below the exact count, for any request hypothesis can build."""

from __future__ import annotations

import base64
import struct
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.config.schema.counting import CountingConfig
from gateway.tokens.bound import has_tools, image_parts, token_upper_bound
from gateway.tokens.counter import TokenCounter

MODELS = ("gpt-4o", "gpt-4", "gpt-4o-mini", "gpt-4.1-nano", "gpt-5", "some-unknown-model")


@pytest.fixture(scope="module")
def counter() -> TokenCounter:
    return TokenCounter.build(CountingConfig(cache_entries=0), {})


def png_url(width: int, height: int) -> str:
    header = b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + b"IHDR" + struct.pack(">II", width, height)
    return "data:image/png;base64," + base64.b64encode(header + b"\x08\x06\x00\x00\x00").decode()


texts = st.text(max_size=40) | st.sampled_from(
    ["", " ", "\n\n", "<|endoftext|>", "1234567890", "é" * 5, "🙂🙂"]
)
json_scalars = st.none() | st.booleans() | st.integers(-1000, 10**6) | texts
image_urls = st.builds(png_url, st.integers(1, 9000), st.integers(1, 9000)) | st.sampled_from(
    ["https://example.com/a.png", "data:image/png;base64,AAAA", "", "data:,"]
)
image_parts_strategy = st.fixed_dictionaries(
    {"type": st.just("image_url")},
    optional={
        "image_url": st.fixed_dictionaries({"url": image_urls}, optional={"detail": texts}) | image_urls
    },
)
parts = st.one_of(
    st.fixed_dictionaries({"type": st.just("text"), "text": texts}),
    st.fixed_dictionaries({"type": st.just("refusal"), "refusal": texts}),
    image_parts_strategy,
    st.fixed_dictionaries({"type": texts}),
    texts,
    json_scalars,
)
calls = st.fixed_dictionaries(
    {"id": texts, "type": st.just("function")},
    optional={
        "function": st.fixed_dictionaries({}, optional={"name": texts, "arguments": texts | json_scalars})
    },
)
messages = st.one_of(
    st.fixed_dictionaries(
        {},
        optional={
            "role": st.sampled_from(["system", "developer", "user", "assistant", "tool"]) | texts,
            "content": texts | st.lists(parts, max_size=4) | json_scalars,
            "name": texts,
            "tool_calls": st.lists(calls, max_size=3),
            "tool_call_id": texts,
            "refusal": texts,
            "function_call": st.fixed_dictionaries({}, optional={"name": texts, "arguments": texts}),
        },
    ),
    json_scalars,
)
schemas = st.recursive(
    st.fixed_dictionaries(
        {},
        optional={
            "type": texts | st.lists(texts, max_size=3),
            "description": texts,
            "enum": st.lists(
                st.integers(0, 9) | json_scalars | st.lists(st.integers(-(2**63), 2**63 - 1), max_size=2),
                max_size=40,
            ),
        },
    ),
    lambda children: st.fixed_dictionaries(
        {"type": st.just("object")},
        optional={"properties": st.dictionaries(texts, children, max_size=3), "items": children},
    ),
    max_leaves=6,
)
functions = st.fixed_dictionaries(
    {},
    optional={
        "name": texts,
        "description": texts,
        "parameters": st.fixed_dictionaries(
            {}, optional={"properties": st.dictionaries(texts, schemas, max_size=4)}
        ),
    },
)
tools = st.one_of(
    st.builds(lambda function: {"type": "function", "function": function}, functions),
    functions,
    json_scalars,
)
bodies = st.fixed_dictionaries(
    {"messages": st.lists(messages, max_size=6)},
    optional={"tools": st.lists(tools, max_size=3), "functions": st.lists(functions, max_size=2)},
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=bodies, model=st.sampled_from(MODELS))
def test_bound_is_never_below_the_count(counter: TokenCounter, body: dict[str, Any], model: str) -> None:
    body_len = len(orjson.dumps(body))
    assert counter.count_chat(model, body).total <= counter.upper_bound(model, body, body_len=body_len)


def test_bound_numeric_enums_need_the_tools_factor(counter: TokenCounter) -> None:
    enum = list(range(10)) * 50
    body = {"messages": [], "tools": [{"name": "f", "parameters": {"properties": {"n": {"enum": enum}}}}]}
    body_len = len(orjson.dumps(body))
    count = counter.count_chat("gpt-4o", body).total
    assert count > body_len  # one token per byte would not be sound here
    assert count <= counter.upper_bound("gpt-4o", body, body_len=body_len)


def test_bound_images_are_added_per_part(counter: TokenCounter) -> None:
    part = {"type": "image_url", "image_url": {"url": png_url(2048, 768)}}
    body = {"messages": [{"role": "user", "content": [part, part]}]}
    body_len = len(orjson.dumps(body))
    count = counter.count_chat("gpt-4o-mini", body).total
    assert count > body_len
    assert counter.upper_bound("gpt-4o-mini", body, body_len=body_len) == body_len + 2 * (2833 + 8 * 5667)


@pytest.mark.parametrize(
    ("body_len", "image_parts_count", "image_max", "tools", "bound"),
    [
        (1000, 0, 1445, False, 1000),
        (1000, 0, 1445, True, 2000),
        (1000, 2, 1445, False, 3890),
        (0, 0, 0, False, 0),
    ],
)
def test_bound_formula(
    body_len: int, image_parts_count: int, image_max: int, tools: bool, bound: int
) -> None:
    assert (
        token_upper_bound(
            body_len, image_parts=image_parts_count, image_max_tokens=image_max, has_tools=tools
        )
        == bound
    )


def test_bound_body_facts() -> None:
    image = {"type": "image_url", "image_url": {"url": "https://x"}}
    body = {
        "messages": [{"role": "user", "content": [image, {"type": "text", "text": "image_url"}, image]}, 3]
    }
    assert image_parts(body) == 2
    assert image_parts({"messages": None}) == 0
    assert not has_tools(body)
    assert has_tools({"tools": [{}]}) and has_tools({"functions": [{}]})
    assert not has_tools({"tools": []})


@pytest.mark.parametrize(("threshold", "expected"), [(1001, True), (1000, False), (999, False)])
def test_bound_cannot_reach_threshold(counter: TokenCounter, threshold: int, expected: bool) -> None:
    body = {"messages": [{"role": "user", "content": "x"}]}
    assert counter.cannot_reach("gpt-4o", body, body_len=1000, threshold=threshold) is expected


@pytest.mark.parametrize("key", ["tools", "functions"])
def test_bound_covers_tool_enums_of_floats_which_counting_prints_again(
    counter: TokenCounter, key: str
) -> None:
    """``1e9`` is 4 bytes with its comma but ``1000000000.0`` when counted: more than 2 tokens a byte."""
    enum = ",".join(["1e9"] * 5000)
    schema = f'{{"type":"object","properties":{{"k":{{"type":"number","enum":[{enum}]}}}}}}'
    function = f'{{"name":"f","parameters":{schema}}}'
    tool = f'{{"type":"function","function":{function}}}' if key == "tools" else function
    raw = f'{{"messages":[{{"role":"user","content":"x"}}],"{key}":[{tool}]}}'.encode()
    body = orjson.loads(raw)
    count = counter.count_chat("gpt-4o", body).total
    assert count > 2 * len(raw)  # what the tools rule alone would allow
    assert counter.upper_bound("gpt-4o", body, body_len=len(raw)) >= count
