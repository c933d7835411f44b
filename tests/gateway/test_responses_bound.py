"""The Responses byte-size bound: never below the exact count, for any body hypothesis can build, however
short its JSON (numbers spelled as briefly as JSON allows), and through the app for the reported body."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.fronts.responses.counting import (
    ADAPTER_ROLE_TOKENS,
    InputShape,
    count_responses,
    input_shape,
    responses_upper_bound,
)
from gateway.tokens.bound import REPRINT_GROWTH, reprints_enum_items
from gateway.tokens.vocab import SUPPORTED_ENCODINGS
from tests.factories import shared_counter
from tests.gateway.test_tokens_bound import functions, png_url

MODELS = ("gpt-5.4", "gpt-4")
WARNING = 250_000
"""The default warning line of gpt-5.4."""


def shortest_float(value: float) -> str:
    """The shortest JSON spelling that reads back as ``value`` (a float: with an exponent or a point)."""
    sign, digit_tuple, exponent = Decimal(repr(value)).normalize().as_tuple()
    assert isinstance(exponent, int)
    digits, minus = "".join(map(str, digit_tuple)), "-" if sign else ""
    spellings = [f"{minus}{digits}e{exponent}"]
    if len(digits) > 1:
        spellings.append(f"{minus}{digits[0]}.{digits[1:]}e{exponent + len(digits) - 1}")
    whole = len(digits) + exponent
    if exponent < 0:
        zeros = "0" * max(0, -whole)  # 0.0192: a point, a zero, then the digits
        spellings.append(
            f"{minus}{digits[:whole]}.{digits[whole:]}" if whole > 0 else f"{minus}0.{zeros}{digits}"
        )
    spellings.append(orjson.dumps(value).decode())  # never longer than orjson's own
    return min((s for s in spellings if orjson.loads(s) == value), key=len)


def shortest_json(value: Any) -> str:
    """``value`` as JSON, as short as it can be written: orjson's (fewest escapes, no whitespace), but every
    float spelled as briefly as possible (``1e15`` where orjson writes ``1000000000000000.0``)."""
    if isinstance(value, float):
        return shortest_float(value)
    if isinstance(value, dict):
        return (
            "{" + ",".join(f"{orjson.dumps(k).decode()}:{shortest_json(v)}" for k, v in value.items()) + "}"
        )
    if isinstance(value, list):
        return "[" + ",".join(shortest_json(v) for v in value) + "]"
    return orjson.dumps(value).decode()


texts = st.text(max_size=30) | st.sampled_from(
    ["", " ", "\n\t\x01\x7f", '"\\', "<|endoftext|>", "1234567890", "é" * 5, "🙂🙂", "\u2028"]
)
floats = st.floats(allow_nan=False, allow_infinity=False) | st.sampled_from(
    [1e5, 1e15, 9e15, 1e16, 1e22, 1e-5, 1e-7, -0.0, 5e-324, 1.5e300]
)
scalars = st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | floats | texts
values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(texts, children, max_size=4),
    max_leaves=12,
)
text_parts = st.fixed_dictionaries(
    {
        "type": st.sampled_from(["input_text", "output_text", "text", "summary_text", "reasoning_text"]),
        "text": texts | scalars,
    },
    optional={"annotations": st.lists(values, max_size=2)},
)
image_parts = st.fixed_dictionaries(
    {"type": st.sampled_from(["input_image", "image_url"])},
    optional={
        "image_url": st.builds(png_url, st.integers(1, 9000), st.integers(1, 9000))
        | st.sampled_from(["https://example.com/a.png", "data:image/png;base64,AAAA", ""])
        | values,
        "detail": st.sampled_from(["low", "high", "auto"]) | texts,
    },
)
parts = st.one_of(
    text_parts,
    image_parts,
    st.fixed_dictionaries({"type": st.just("refusal")}, optional={"refusal": texts | scalars}),
    st.fixed_dictionaries({"type": texts | scalars}, optional={"file_data": texts}),
    values,
)
contents = texts | st.lists(parts, max_size=4) | values
roles = st.sampled_from(["user", "assistant", "system", "developer", "tool"]) | texts | scalars
call_ids = st.text(min_size=1, max_size=8) | scalars
messages = st.fixed_dictionaries(
    {"role": roles},
    optional={
        "type": st.just("message"),
        "content": contents,
        "id": texts,
        "status": texts,
        "call_id": call_ids,
    },
) | st.fixed_dictionaries({"type": st.just("message")}, optional={"content": contents, "role": roles})
function_calls = st.fixed_dictionaries(
    {"type": st.just("function_call")},
    optional={"call_id": call_ids, "name": texts | scalars, "arguments": texts | values, "id": texts},
)
custom_calls = st.fixed_dictionaries(
    {"type": st.just("custom_tool_call")},
    optional={"call_id": call_ids, "name": texts | scalars, "input": texts | values},
)
other_calls = st.fixed_dictionaries(
    {"type": st.sampled_from(["computer_call", "local_shell_call", "mcp_call", "x_call"]) | texts},
    optional={
        "call_id": call_ids,
        "status": texts,
        "action": values,
        "pending_safety_checks": st.lists(values, max_size=2),
        "id": texts,
    },
)
outputs = st.fixed_dictionaries(
    {
        "type": st.sampled_from(
            ["function_call_output", "custom_tool_call_output", "computer_call_output", "x_output"]
        ),
        "call_id": call_ids,
    },
    optional={"output": texts | st.lists(parts, max_size=4) | values, "status": texts},
)
summary_parts = st.fixed_dictionaries({"type": st.just("summary_text"), "text": texts | scalars}) | values
reasonings = st.fixed_dictionaries(
    {"type": st.just("reasoning")},
    optional={
        "summary": st.lists(summary_parts, max_size=3) | values,
        "content": st.lists(summary_parts, max_size=2),
        "encrypted_content": texts,
        "id": texts,
        "call_id": call_ids,
    },
)
others: st.SearchStrategy[Any] = (
    st.just({})
    | st.dictionaries(texts, values, max_size=4)
    | st.fixed_dictionaries(
        {"type": st.sampled_from(["web_search_call", "item_reference", "compaction"]) | texts},
        optional={"id": texts, "encrypted_content": texts, "payload": values},
    )
)
items = st.one_of(messages, function_calls, custom_calls, other_calls, outputs, reasonings, others, values)
enum_schemas = st.fixed_dictionaries(
    {"enum": st.lists(floats | values, max_size=6)}, optional={"type": texts, "description": texts}
)
enum_functions = st.fixed_dictionaries(
    {"name": texts},
    optional={
        "parameters": st.fixed_dictionaries(
            {
                "properties": st.dictionaries(
                    texts, enum_schemas | st.fixed_dictionaries({"items": enum_schemas})
                )
            }
        )
    },
)
flat_tools = st.one_of(
    st.builds(lambda function: {"type": "function", **function}, functions | enum_functions),
    st.fixed_dictionaries({"type": st.sampled_from(["web_search", "custom"])}, optional={"name": texts}),
    values,
)
bodies = st.fixed_dictionaries(
    {"input": st.lists(items, max_size=8) | texts},
    optional={"instructions": texts | scalars, "tools": st.lists(flat_tools, max_size=3) | values},
)


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=bodies, model=st.sampled_from(MODELS))
def test_responses_bound_is_never_below_the_count(body: dict[str, Any], model: str) -> None:
    counter = shared_counter()
    raw = shortest_json(body).encode()
    assert len(raw) <= len(orjson.dumps(body))  # the dangerous direction: fewer bytes for the same body
    parsed = orjson.loads(raw)
    exact = count_responses(counter, model, parsed).total
    assert exact <= responses_upper_bound(counter, model, parsed, len(raw))


FLOAT_ENUM_TOOLS = (
    '[{"type":"function","name":"f","parameters":{"properties":{"k":{"enum":['
    + ",".join(["1e9"] * 5_000)
    + "]}}}}]"
)


def repeated(item: str, times: int, **fields: str) -> bytes:
    """A body written by hand: ``times`` copies of the JSON text ``item``."""
    head = "".join(f'"{key}":{value},' for key, value in fields.items())
    return f'{{"model":"gpt-5.4",{head}"input":[{",".join([item] * times)}]}}'.encode()


@pytest.mark.parametrize(
    "raw",
    [
        repeated("{}", 70_000),  # the report: 210 KB, 350,003 tokens
        repeated("{}", 5_000, instructions='"x"', tools='[{"name":"f"}]'),
        repeated("1", 5_000),  # not objects: wrapped by the adapter
        repeated('{"type":"x","v":[1e15,1e15,1e15,1e15,1e15,1e15]}', 2_000),
        repeated('{"type":"x_call","call_id":"c","a":[1e15,1e5,1e-5,1e16]}', 2_000),
        repeated('{"type":"x_output","call_id":"c","output":{"v":[1e15,1e15]}}', 2_000),
        repeated('{"type":"x_output","call_id":"c"}', 5_000),  # no output: printed as null
        repeated('{"role":""}', 5_000),
        repeated('{"type":"message"}', 5_000),  # the adapter writes its role
        repeated('{"type":"reasoning"}', 5_000),  # one assistant message at the end
        repeated('{"type":"function_call","call_id":"c"}', 5_000),
        repeated('{"type":"message","content":[{"type":"image_url"}]}', 200),
        repeated('{"type":"x_output","call_id":"c","output":[{"type":"input_image"}]}', 200),
        repeated('{"role":"user","content":"hi"}', 1, tools=FLOAT_ENUM_TOOLS),  # 1e9: 9 tokens, 4 bytes
    ],
)
@pytest.mark.parametrize("model", MODELS)
def test_responses_bound_covers_bodies_written_as_short_as_json_allows(raw: bytes, model: str) -> None:
    counter = shared_counter()
    body = orjson.loads(raw)
    exact = count_responses(counter, model, body).total
    assert exact <= responses_upper_bound(counter, model, body, len(raw))


def test_responses_bound_keeps_the_reported_body_from_being_decided_below_the_warning_line() -> None:
    counter = shared_counter()
    raw = repeated("{}", 70_000)
    body = orjson.loads(raw)
    assert 200_000 < len(raw) < WARNING
    assert count_responses(counter, "gpt-5.4", body).total == 350_003
    assert responses_upper_bound(counter, "gpt-5.4", body, len(raw)) >= WARNING


def test_responses_bound_of_plain_text_stays_one_token_a_byte() -> None:
    """Without tools or printed items the bound costs the bytes plus a small allowance per item."""
    counter = shared_counter()
    body = {"model": "gpt-5.4", "input": [{"role": "user", "content": "x" * 50_000}] * 4}
    body_len = len(orjson.dumps(body))
    assert responses_upper_bound(counter, "gpt-5.4", body, body_len) == body_len + 4 * (4 + 1) + 3


@pytest.mark.parametrize("model", MODELS)
def test_responses_bound_adapter_roles_are_one_token(model: str) -> None:
    """The per-item allowance assumes each role the adapter writes is one token, in every encoding."""
    profile = shared_counter().profile(model)
    for role in ("user", "assistant", "tool", "system"):
        assert len(profile.encoding.encode_ordinary(role)) == ADAPTER_ROLE_TOKENS
    assert {shared_counter().profile(name).encoding_name for name in MODELS} == set(SUPPORTED_ENCODINGS)


def test_responses_bound_orjson_prints_a_float_at_most_4_5_times_longer() -> None:
    """The lemma behind ``REPRINT_GROWTH``, for every decimal exponent: ``1e15`` is the worst case."""
    for exponent in range(-330, 310):
        for digits in ("1", "9", "12", "123456789"):
            try:
                value = orjson.loads(f"{digits}e{exponent}")
            except orjson.JSONDecodeError:  # beyond a double
                continue
            short = shortest_float(value) if value else "0e0"
            assert len(orjson.dumps(value)) <= REPRINT_GROWTH * len(short), short
    assert len(orjson.dumps(orjson.loads("1e15"))) == REPRINT_GROWTH * len("1e15")


@settings(max_examples=2000, deadline=None)
@given(value=floats)
def test_responses_bound_orjson_prints_any_float_at_most_4_5_times_longer(value: float) -> None:
    assert len(orjson.dumps(value)) <= REPRINT_GROWTH * len(shortest_float(value))


def test_responses_bound_input_shape() -> None:
    body = {
        "input": [
            {"role": "user", "content": [{"type": "input_image"}, {"type": "input_text", "text": "a"}]},
            {"type": "function_call_output", "call_id": "c", "output": [{"type": "image_url"}]},
            {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
        ]
    }
    assert input_shape(body) == InputShape(items=3, wrapped=0, images=2, reprinted=False)
    assert input_shape({"input": "hi"}).items == 1 and input_shape({}).items == 0
    for item in ({}, {"type": "computer_call", "call_id": "c"}, {"type": "x_output", "call_id": "c"}):
        assert input_shape({"input": [item]}).reprinted
    assert input_shape({"input": [3]}).wrapped == 1


def test_responses_bound_tools_with_enum_items_printed_again() -> None:
    assert reprints_enum_items(orjson.loads(FLOAT_ENUM_TOOLS))
    nested = [{"name": "f", "parameters": {"properties": {"k": {"items": {"enum": [[1]]}}}}}]
    assert reprints_enum_items(nested) and reprints_enum_items([{"a": {"enum": [{}]}}])
    assert not reprints_enum_items([{"name": "f", "parameters": {"enum": ["a", 1, True, None]}}])
    assert not reprints_enum_items(None)
    deep: list[Any] = []
    for _ in range(5_000):
        deep = [deep]
    assert not reprints_enum_items(deep)  # no recursion
