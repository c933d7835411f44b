"""The Messages count (an estimate, marked so) and its byte-size bound, never below it for any body."""

from __future__ import annotations

import base64
import math
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.fronts.messages.counting import (
    ADAPTER_ROLE_TOKENS,
    OPAQUE_CHARS_PER_TOKEN,
    PER_ITEM,
    TOOL_OVERHEAD,
    TOOLS_PROMPT,
    count_prompt,
    messages_shape,
    messages_upper_bound,
)
from gateway.fronts.messages.media import (
    IMAGE_MAX_TOKENS,
    PDF_ASSUMED_PAGES,
    PDF_PAGE_TOKENS,
    scaled_image_tokens,
)
from gateway.fronts.messages.view import to_view
from gateway.tokens.messages import REPLY_PRIMER
from gateway.tokens.vocab import SUPPORTED_ENCODINGS
from tests.factories import shared_counter
from tests.gateway.test_responses_bound import floats, shortest_float, texts, values
from tests.gateway.test_tokens_bound import png_url

MODEL = "claude-sonnet-4-5"
MODELS = (MODEL, "gpt-4")
"""One model on each supported encoding (an unknown name gets the default, o200k_base)."""


def png(width: int, height: int) -> dict[str, Any]:
    data = png_url(width, height).split(",", 1)[1]
    return {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}}


def pdf(pages: int) -> dict[str, Any]:
    objects = b"".join(b"%d 0 obj << /Type /Page /Parent 1 0 R >> endobj\n" % n for n in range(pages))
    raw = b"%PDF-1.4\n1 0 obj << /Type /Pages /Count 3 >> endobj\n" + objects + b"%%EOF"
    data = base64.b64encode(raw).decode()
    return {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": data}}


def briefest_json(value: Any) -> str:
    """``value`` as JSON as short as it can be written: orjson's, but each float in its shortest spelling
    (``1e15`` where orjson writes ``1000000000000000.0``)."""
    if isinstance(value, float):
        return min(shortest_float(value), orjson.dumps(value).decode(), key=len)
    if isinstance(value, dict):
        return (
            "{" + ",".join(f"{orjson.dumps(k).decode()}:{briefest_json(v)}" for k, v in value.items()) + "}"
        )
    if isinstance(value, list):
        return "[" + ",".join(briefest_json(v) for v in value) + "]"
    return orjson.dumps(value).decode()


def count(body: dict[str, Any], model: str = MODEL) -> Any:
    return count_prompt(shared_counter(), model, body)


def test_count_reads_blocks_as_the_equivalent_chat_request_does() -> None:
    body = {
        "system": [{"type": "text", "text": "You are a coding agent."}],
        "messages": [
            {"role": "user", "content": "list the files"},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Sure."},
                    {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"cmd": "ls"}},
                ],
            },
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "a.txt"}]},
        ],
    }
    chat = {
        "messages": [
            {"role": "system", "content": "You are a coding agent."},
            {"role": "user", "content": "list the files"},
            {
                "role": "assistant",
                "content": "Sure.",
                "tool_calls": [{"id": "t1", "function": {"name": "Bash", "arguments": '{"cmd":"ls"}'}}],
            },
            {"role": "tool", "tool_call_id": "t1", "content": "a.txt"},
        ]
    }
    counted = count(body)
    expected = shared_counter().count_chat(MODEL, chat)
    assert (counted.total, counted.messages, counted.tools) == (expected.total, expected.messages, 0)
    assert counted.per_message == expected.per_message
    assert counted.approximate and counted.encoding == "o200k_base"


def test_count_is_always_approximate_and_per_message_follows_the_view() -> None:
    body = {
        "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "f", "input": {}}]},
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "a", "content": "1"},
                    {"type": "text", "text": "then?"},
                ],
            },
        ]
    }
    counted = count(body, "gpt-4")
    assert counted.approximate and counted.encoding == "cl100k_base"
    assert len(counted.per_message) == len(to_view(body)) == 4
    assert sum(counted.per_message) + REPLY_PRIMER == counted.total


def test_count_tools_with_the_tool_use_prompt_and_tool_choice() -> None:
    profile = shared_counter().profile(MODEL)
    schema = {"type": "object", "properties": {"cmd": {"type": "string"}}}
    tools = [
        {
            "name": "Bash",
            "description": "Run a command.",
            "input_schema": schema,
            "cache_control": {"type": "x"},
        },
        {"type": "web_search_20250305", "name": "web_search", "max_uses": 3},
    ]
    body = {"messages": [{"role": "user", "content": "hi"}], "tools": tools, "tool_choice": {"type": "auto"}}
    expected = (
        TOOLS_PROMPT
        + 2 * TOOL_OVERHEAD
        + profile.count("Bash")
        + profile.count("Run a command.")
        + profile.count(orjson.dumps(schema).decode())
        + profile.count('{"type":"web_search_20250305","name":"web_search","max_uses":3}')
        + profile.count('{"type":"auto"}')
    )
    assert count(body).tools == expected
    assert count({**body, "tools": []}).tools == 0


@pytest.mark.parametrize(
    ("width", "height", "tokens"),
    [
        (200, 200, 54),  # 40,000 / 750, rounded up
        (1000, 1000, 1334),
        (1092, 1092, 1590),
        (4000, 3000, 1598),  # scaled to 1264 x 948 (1.2 megapixels at most): 1,198,272 / 750
        (8000, 200, 82),  # long edge scaled to 1568: 1568 x 39
    ],
)
def test_count_images_by_anthropics_estimate(width: int, height: int, tokens: int) -> None:
    assert scaled_image_tokens(width, height) == tokens
    body = {"messages": [{"role": "user", "content": [png(width, height)]}]}
    assert count(body).images == tokens


def test_count_image_of_unknown_size_at_the_cap() -> None:
    url = {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}}
    broken = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}}
    assert count({"messages": [{"role": "user", "content": [url, broken]}]}).images == 2 * IMAGE_MAX_TOKENS


def test_count_pdf_by_its_pages_and_a_linked_one_by_an_assumed_number() -> None:
    linked = {"type": "document", "source": {"type": "url", "url": "https://example.com/a.pdf"}}
    assert count({"messages": [{"role": "user", "content": [pdf(3)]}]}).images == 3 * PDF_PAGE_TOKENS
    assert count({"messages": [{"role": "user", "content": [linked]}]}).images == (
        PDF_ASSUMED_PAGES * PDF_PAGE_TOKENS
    )


def test_count_thinking_text_but_not_its_signature_and_redacted_data_by_length() -> None:
    def body(signature: str, data: str) -> dict[str, Any]:
        blocks = [
            {"type": "thinking", "thinking": "Let me think about it.", "signature": signature},
            {"type": "redacted_thinking", "data": data},
            {"type": "text", "text": "Done."},
        ]
        return {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": blocks}]}

    short, long = count(body("s", "x" * 40)), count(body("s" * 5000, "x" * 400))
    assert long.total - short.total == (400 - 40) // OPAQUE_CHARS_PER_TOKEN
    profile = shared_counter().profile(MODEL)
    assert count(body("s", "")).per_message[1] == (
        3 + profile.count("assistant") + profile.count("Let me think about it.") + profile.count("Done.")
    )


def test_count_documents_search_results_and_server_tools() -> None:
    profile = shared_counter().profile(MODEL)
    text_document = {
        "type": "document",
        "source": {"type": "text", "media_type": "text/plain", "data": "The manual."},
        "title": "Manual",
        "context": "v2",
    }
    search = {
        "type": "search_result",
        "source": "https://example.com",
        "title": "Example",
        "content": [{"type": "text", "text": "Found it."}],
    }
    body = {"messages": [{"role": "user", "content": [text_document, search]}]}
    strings = ("user", "Manual", "v2", "The manual.", "https://example.com", "Example", "Found it.")
    assert count(body).per_message == (3 + sum(profile.count(text) for text in strings),)


def test_count_caches_each_message_by_its_content() -> None:
    counter = shared_counter()
    body = {"messages": [{"role": "user", "content": "a fairly unique message about caching " * 3}]}
    count_prompt(counter, MODEL, body)
    hits = counter.cache.hits
    count_prompt(counter, MODEL, {"messages": [*body["messages"], {"role": "assistant", "content": "ok"}]})
    assert counter.cache.hits == hits + 1


# --- the bound -----------------------------------------------------------------------------------


def mostly(usual: st.SearchStrategy[Any], rare: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """``usual`` nine times in ten, else ``rare`` (the shapes a client sends, and anything JSON)."""
    return st.one_of(*[usual] * 9, rare)


controls = st.fixed_dictionaries(
    {"type": st.just("ephemeral")}, optional={"ttl": st.sampled_from(["5m", "1h"])}
)
float_lists = st.lists(floats, min_size=1, max_size=12) | st.lists(
    st.sampled_from([1e15, 9e15]), min_size=20, max_size=80
)
"""Floats, and lists of the floats orjson prints longest (``1e15``: 9 tokens for 5 bytes)."""
sources = st.one_of(
    st.builds(lambda w, h: png(w, h)["source"], st.integers(1, 9000), st.integers(1, 9000)),
    st.builds(lambda pages: pdf(pages)["source"], st.integers(0, 5)),
    st.fixed_dictionaries(
        {"type": st.sampled_from(["base64", "url", "file", "text", "content"])},
        optional={
            "data": texts,
            "media_type": st.sampled_from(["image/png", "application/pdf", "text/plain"]) | texts,
            "url": texts,
            "content": texts | st.lists(st.deferred(lambda: inner_blocks), max_size=3),
        },
    ),
    values,
)
text_blocks = st.fixed_dictionaries(
    {"type": st.just("text"), "text": mostly(texts, values)}, optional={"cache_control": controls}
)
media_blocks = st.fixed_dictionaries(
    {"type": st.sampled_from(["image", "document"])}, optional={"source": sources}
)
document_blocks = st.fixed_dictionaries(
    {"type": st.just("document")},
    optional={"source": sources, "title": texts | values, "context": texts, "citations": values},
)
search_blocks = st.fixed_dictionaries(
    {"type": st.just("search_result")},
    optional={"source": texts | values, "title": texts, "content": st.lists(values, max_size=3)},
)
other_blocks = st.fixed_dictionaries(
    {"type": texts | st.sampled_from(["server_tool_use", "web_search_tool_result"])},
    optional={"payload": values | float_lists, "encrypted_content": texts},
)
inner_blocks = st.one_of(text_blocks, media_blocks, document_blocks, search_blocks, other_blocks, values)
blocks = st.one_of(
    text_blocks,
    media_blocks,
    document_blocks,
    search_blocks,
    other_blocks,
    st.fixed_dictionaries(
        {"type": st.just("tool_use")},
        optional={
            "id": texts | values,
            "name": mostly(texts, values),
            "input": values | float_lists,
            "cache_control": controls,
        },
    ),
    st.fixed_dictionaries(
        {"type": st.just("tool_result")},
        optional={
            "tool_use_id": texts | values,
            "content": texts | st.lists(inner_blocks, max_size=3) | values,
            "is_error": st.booleans(),
            "cache_control": controls,
        },
    ),
    st.fixed_dictionaries(
        {"type": st.just("thinking")}, optional={"thinking": texts | values, "signature": texts}
    ),
    st.fixed_dictionaries({"type": st.just("redacted_thinking")}, optional={"data": texts | values}),
    values,
)
messages = mostly(
    st.fixed_dictionaries(
        {"role": mostly(st.sampled_from(["user", "assistant"]), texts | values)},
        optional={"content": mostly(st.lists(blocks, max_size=5), texts | values)},
    ),
    values,
)
tool_definitions = st.one_of(
    st.fixed_dictionaries(
        {},
        optional={
            "name": texts | values,
            "description": texts | values,
            "input_schema": values | st.fixed_dictionaries({"minimum": floats}),
        },
    ),
    st.fixed_dictionaries({"type": texts}, optional={"name": texts, "max_uses": floats | st.integers(0, 99)}),
    values,
)
bodies = st.fixed_dictionaries(
    {"messages": mostly(st.lists(messages, max_size=6), values)},
    optional={
        "system": texts | st.lists(inner_blocks, max_size=3) | values,
        "tools": st.lists(tool_definitions, max_size=3) | values,
        "tool_choice": values,
        "cache_control": controls | values,
    },
)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=bodies, model=st.sampled_from(MODELS))
def test_bound_is_never_below_the_count(body: dict[str, Any], model: str) -> None:
    counter = shared_counter()
    raw = briefest_json(body).encode()
    assert len(raw) <= len(orjson.dumps(body))
    parsed = orjson.loads(raw)
    assert count_prompt(counter, model, parsed).total <= messages_upper_bound(
        counter, model, parsed, len(raw)
    )


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=bodies)
def test_shape_counts_the_view_messages(body: dict[str, Any]) -> None:
    parsed = orjson.loads(orjson.dumps(body))
    assert messages_shape(parsed).views == len(to_view(parsed))


FLOATS = "[" + ",".join(["1e15"] * 5_000) + "]"
"""Printed again as 9 tokens for every 5 bytes."""


def written(message: str, times: int, **fields: str) -> bytes:
    """A body written by hand: ``times`` copies of the JSON text ``message``."""
    head = "".join(f'"{key}":{value},' for key, value in fields.items())
    return f'{{"model":"{MODEL}",{head}"messages":[{",".join([message] * times)}]}}'.encode()


@pytest.mark.parametrize(
    "raw",
    [
        written("{}", 50_000),
        written('{"role":"user","content":[]}', 5_000),
        written('{"role":"user","content":[{},{},{}]}', 5_000),  # three blocks, one view message
        written('{"role":"user","content":[{"type":"tool_result"},{"type":"text","text":""}]}', 3_000),
        written(f'{{"role":"assistant","content":[{{"type":"tool_use","input":{FLOATS}}}]}}', 1),
        written(f'{{"role":"user","content":[{{"type":"x","v":{FLOATS}}}]}}', 1),
        written('{"role":"user","content":[{"type":"image"}]}', 300),
        written('{"role":"user","content":[{"type":"document"}]}', 3),
        written('{"role":"assistant","content":[{"type":"redacted_thinking","data":"abcd"}]}', 3_000),
        written('{"role":"user","content":"hi"}', 1, tools=f'[{{"name":"f","input_schema":{FLOATS}}}]'),
        written('{"role":"user","content":"hi"}', 1, tools=f'[{{"type":"x","v":{FLOATS}}}]'),
        written('{"role":"user","content":"hi"}', 1, tools="[{},{},{}]", tool_choice=FLOATS),
        written('{"role":"user","content":"hi"}', 1, system=f'[{{"type":"x","v":{FLOATS}}}]'),
    ],
)
@pytest.mark.parametrize("model", MODELS)
def test_bound_covers_bodies_written_as_short_as_json_allows(raw: bytes, model: str) -> None:
    counter = shared_counter()
    body = orjson.loads(raw)
    assert count_prompt(counter, model, body).total <= messages_upper_bound(counter, model, body, len(raw))


def test_bound_of_plain_text_stays_one_token_a_byte() -> None:
    counter = shared_counter()
    body = {
        "model": MODEL,
        "max_tokens": 100,
        "system": "You are brief.",
        "messages": [{"role": "user", "content": [{"type": "text", "text": "x" * 50_000}]}] * 4,
    }
    body_len = len(orjson.dumps(body))
    assert messages_upper_bound(counter, MODEL, body, body_len) == body_len + 5 * PER_ITEM + REPLY_PRIMER


def test_bound_with_tool_inputs_without_floats_stays_one_token_a_byte() -> None:
    counter = shared_counter()
    use = {"type": "tool_use", "id": "t", "name": "Write", "input": {"path": "a.py", "content": "y" * 9000}}
    body = {"messages": [{"role": "assistant", "content": [use]}] * 10}
    body_len = len(orjson.dumps(body))
    assert messages_upper_bound(counter, MODEL, body, body_len) == body_len + 10 * PER_ITEM + REPLY_PRIMER
    floated = {"messages": [{"role": "assistant", "content": [{**use, "input": {"x": 0.5}}]}]}
    assert (
        messages_upper_bound(counter, MODEL, floated, 100) == math.ceil(4.5 * 100) + PER_ITEM + REPLY_PRIMER
    )


def test_bound_keeps_a_large_body_of_empty_messages_from_being_decided_below_the_line() -> None:
    counter = shared_counter()
    raw = written("{}", 70_000)
    body = orjson.loads(raw)
    assert len(raw) < 250_000 < count_prompt(counter, MODEL, body).total
    assert messages_upper_bound(counter, MODEL, body, len(raw)) >= 250_000


@pytest.mark.parametrize("model", MODELS)
def test_bound_adapter_roles_are_one_token(model: str) -> None:
    profile = shared_counter().profile(model)
    for role in ("user", "assistant", "tool", "system"):
        assert len(profile.encoding.encode_ordinary(role)) == ADAPTER_ROLE_TOKENS
    assert {shared_counter().profile(name).encoding_name for name in MODELS} == set(SUPPORTED_ENCODINGS)
