"""TokenCounter: chat requests as OpenAI bills them, caching, async offload, embeddings, text."""

from __future__ import annotations

import base64
import struct
import threading
import zlib
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from gateway.config.runtime import Runtime, build_runtime
from gateway.config.schema.counting import CountingConfig
from gateway.config.schema.root import GatewayConfig, ModelConfig
from gateway.core.front import CHAT
from gateway.core.planning import _count_async
from gateway.tokens.adapter import ModelTokens
from gateway.tokens.cache import LRUCache
from gateway.tokens.counter import TokenCounter
from gateway.tokens.vocab import UnknownEncoding, load_vocabulary
from tests.factories import make_config

JARGON = [
    {
        "role": "system",
        "content": "You are a helpful, pattern-following assistant that translates corporate jargon "
        "into plain English.",
    },
    {"role": "system", "name": "example_user", "content": "New synergies will help drive top-line growth."},
    {
        "role": "system",
        "name": "example_assistant",
        "content": "Things working well together will increase revenue.",
    },
    {
        "role": "system",
        "name": "example_user",
        "content": "Let's circle back when we have more bandwidth to touch base on opportunities for "
        "increased leverage.",
    },
    {
        "role": "system",
        "name": "example_assistant",
        "content": "Let's talk later when we're less busy about how to do better.",
    },
    {
        "role": "user",
        "content": "This late pivot means we don't have time to boil the ocean for the client deliverable.",
    },
]


def png_url(width: int, height: int) -> str:
    header = struct.pack(">IIBBBBB", width, height, 8, 6, 0, 0, 0)
    ihdr = struct.pack(">I", 13) + b"IHDR" + header + struct.pack(">I", zlib.crc32(b"IHDR" + header))
    return "data:image/png;base64," + base64.b64encode(b"\x89PNG\r\n\x1a\n" + ihdr).decode()


@pytest.fixture(scope="module")
def encodings() -> dict[str, Any]:
    return {name: load_vocabulary(name).encoding for name in ("o200k_base", "cl100k_base")}


def make_counter(
    encodings: dict[str, Any], models: dict[str, ModelConfig] | None = None, **config: Any
) -> TokenCounter:
    return TokenCounter(encodings=encodings, models=models or {}, config=CountingConfig(**config))


@pytest.fixture
def counter(encodings: dict[str, Any]) -> TokenCounter:
    return make_counter(encodings)


def tokens(counter: TokenCounter, model: str, text: str) -> int:
    return counter.count_text(model, text)


# -- messages ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "total"), [("gpt-4", 129), ("gpt-3.5-turbo", 129), ("gpt-4o", 124), ("gpt-4o-mini", 124)]
)
def test_counter_cookbook_messages_match_the_api(counter: TokenCounter, model: str, total: int) -> None:
    # OpenAI's cookbook checked these totals against the API (section 6).
    count = counter.count_chat(model, {"messages": JARGON})
    assert (count.total, count.messages, count.tools, count.images) == (total, total, 0, 0)
    assert sum(count.per_message) + 3 == total
    assert count.encoding == (
        "cl100k_base" if model.startswith(("gpt-4-", "gpt-3")) or model == "gpt-4" else "o200k_base"
    )


def test_counter_message_framing_and_name(counter: TokenCounter) -> None:
    plain = counter.count_chat("gpt-4o", {"messages": [{"role": "user", "content": "Hi there"}]})
    assert plain.total == 3 + tokens(counter, "gpt-4o", "user") + tokens(counter, "gpt-4o", "Hi there") + 3
    named = counter.count_chat(
        "gpt-4o", {"messages": [{"role": "user", "name": "ann", "content": "Hi there"}]}
    )
    assert named.total - plain.total == 1 + tokens(counter, "gpt-4o", "ann")


def test_counter_content_parts_count_their_text(counter: TokenCounter) -> None:
    parts = [{"type": "text", "text": "first part"}, {"type": "text", "text": "second part"}]
    count = counter.count_chat("gpt-4o", {"messages": [{"role": "user", "content": parts}]})
    text = tokens(counter, "gpt-4o", "first part") + tokens(counter, "gpt-4o", "second part")
    assert count.total == 3 + 1 + text + 3
    assert not count.approximate


def test_counter_assistant_tool_calls_and_tool_results(counter: TokenCounter) -> None:
    call = {
        "id": "call_abc",
        "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city":"Oslo"}'},
    }
    messages = [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_abc", "content": "12 degrees, rain"},
    ]
    count = counter.count_chat("gpt-4o", {"messages": messages})
    assistant = 3 + tokens(counter, "gpt-4o", "assistant") + tokens(counter, "gpt-4o", "get_weather")
    assistant += tokens(counter, "gpt-4o", '{"city":"Oslo"}')
    tool = 3 + tokens(counter, "gpt-4o", "tool") + tokens(counter, "gpt-4o", "12 degrees, rain")
    assert count.per_message == (assistant, tool)
    assert count.total == assistant + tool + 3


def test_counter_legacy_function_call_and_refusal(counter: TokenCounter) -> None:
    message = {"role": "assistant", "function_call": {"name": "f", "arguments": "{}"}, "refusal": "No."}
    count = counter.count_chat("gpt-4o", {"messages": [message]})
    expected = 3 + sum(tokens(counter, "gpt-4o", text) for text in ("assistant", "f", "{}", "No."))
    assert count.per_message == (expected,)


def test_counter_images_by_family(counter: TokenCounter) -> None:
    parts = [
        {"type": "text", "text": "What is this?"},
        {"type": "image_url", "image_url": {"url": png_url(1024, 1024)}},
    ]
    body = {"messages": [{"role": "user", "content": parts}]}
    assert counter.count_chat("gpt-4o", body).images == 765
    assert counter.count_chat("gpt-5", body).images == 630
    assert counter.count_chat("gpt-4o-mini", body).images == 25501
    assert counter.count_chat("gpt-4.1-mini", body).images == 1659
    count = counter.count_chat("gpt-4o", body)
    assert count.total == count.messages + 765
    assert count.per_message == (count.messages - 3 + 765,)
    assert not count.approximate


def test_counter_remote_image_is_assumed_and_approximate(encodings: dict[str, Any]) -> None:
    body = {
        "messages": [
            {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "https://x/y.png"}}]}
        ]
    }
    default = make_counter(encodings).count_chat("gpt-4o", body)
    assert (default.images, default.approximate) == (765, True)
    small = make_counter(encodings, remote_image_width=512, remote_image_height=512).count_chat(
        "gpt-4o", body
    )
    assert small.images == 255


def test_counter_audio_and_file_parts_are_approximate(counter: TokenCounter) -> None:
    parts = [{"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}}]
    assert counter.count_chat("gpt-4o", {"messages": [{"role": "user", "content": parts}]}).approximate


def test_counter_unknown_model_uses_default_encoding_and_is_approximate(encodings: dict[str, Any]) -> None:
    body = {"messages": [{"role": "user", "content": "hello world"}]}
    o200k = make_counter(encodings).count_chat("llama-3-70b", body)
    cl100k = make_counter(encodings, default_encoding="cl100k_base").count_chat("llama-3-70b", body)
    assert (o200k.encoding, o200k.approximate) == ("o200k_base", True)
    assert (cl100k.encoding, cl100k.approximate) == ("cl100k_base", True)


def test_counter_model_config_decides_encoding(encodings: dict[str, Any]) -> None:
    models = {
        "fast": ModelConfig(provider="p", upstream_model="gpt-4-0613"),
        "house": ModelConfig(provider="p", encoding="cl100k_base"),
        "gpt-4o": ModelConfig(provider="p", encoding="cl100k_base"),
    }
    counter = make_counter(encodings, models)
    body = {"messages": [{"role": "user", "content": "hi"}]}
    for model in models:
        count = counter.count_chat(model, body)
        assert (count.encoding, count.approximate) == ("cl100k_base", False)


def test_counter_default_encoding_must_be_loaded(encodings: dict[str, Any]) -> None:
    with pytest.raises(UnknownEncoding, match="o200k_base"):
        TokenCounter(encodings={"cl100k_base": encodings["cl100k_base"]}, models={}, config=CountingConfig())


def test_counter_non_json_message_counts_uncached(encodings: dict[str, Any]) -> None:
    counter = make_counter(encodings)
    odd = {"role": "user", "content": "hello world", "metadata": object()}
    count = counter.count_chat("gpt-4o", {"messages": [odd]})
    assert (
        count.total
        == counter.count_chat("gpt-4o", {"messages": [{"role": "user", "content": "hello world"}]}).total
    )
    assert (counter.cache.hits, counter.cache.misses, len(counter.cache)) == (0, 1, 1)


def test_counter_lru_cache_edges() -> None:
    with pytest.raises(ValueError, match="capacity"):
        LRUCache[int](-1)
    off = LRUCache[int](0)
    off.put("k", 1)
    assert (off.get("k"), len(off)) == (None, 0)
    lru = LRUCache[int](2)
    lru.put("a", 1)
    lru.put("b", 2)
    assert lru.get("a") == 1
    lru.put("c", 3)
    assert (lru.get("b"), lru.get("a"), lru.get("c")) == (None, 1, 3)


def test_counter_unknown_configured_encoding_fails_at_start(encodings: dict[str, Any]) -> None:
    with pytest.raises(UnknownEncoding, match="p50k_base"):
        make_counter(encodings, {"old": ModelConfig(provider="p", encoding="p50k_base")})


def test_counter_ignores_malformed_parts(counter: TokenCounter) -> None:
    body = {
        "messages": [
            "junk",
            {"role": "user", "content": 42},
            {"role": "user", "content": [7, None]},
            {"role": "user", "tool_calls": ["x", {"type": "function"}], "function_call": "x"},
        ]
    }
    count = counter.count_chat("gpt-4o", body)
    assert count.per_message == (4, 4, 4)
    assert counter.count_chat("gpt-4o", {"messages": "nope"}).total == 3


# -- caching ----------------------------------------------------------------------------------------


def conversation(turns: int) -> list[dict[str, str]]:
    return [
        {
            "role": "user" if turn % 2 == 0 else "assistant",
            "content": f"Turn {turn}: note {turn * 7919 % 1000}.",
        }
        for turn in range(turns)
    ]


def test_counter_cache_counts_only_the_new_turn(encodings: dict[str, Any]) -> None:
    counter = make_counter(encodings)
    first = counter.count_chat("gpt-4o", {"messages": conversation(200)})
    assert (counter.cache.hits, counter.cache.misses) == (0, 200)
    grown = counter.count_chat("gpt-4o", {"messages": conversation(201)})
    assert (counter.cache.hits, counter.cache.misses) == (200, 201)
    fresh = make_counter(encodings, cache_entries=0).count_chat("gpt-4o", {"messages": conversation(201)})
    assert grown == fresh
    assert grown.total - first.total == grown.per_message[-1]


def test_counter_cache_is_bounded(encodings: dict[str, Any]) -> None:
    counter = make_counter(encodings, cache_entries=5)
    counter.count_chat("gpt-4o", {"messages": conversation(50)})
    assert len(counter.cache) == 5


def test_counter_cache_separates_encodings(encodings: dict[str, Any]) -> None:
    counter = make_counter(encodings)
    body = {"messages": conversation(3)}
    assert counter.count_chat("gpt-4o", body) == make_counter(encodings).count_chat("gpt-4o", body)
    assert counter.count_chat("gpt-4", body) == make_counter(encodings).count_chat("gpt-4", body)


def test_counter_cache_separates_image_rules(encodings: dict[str, Any]) -> None:
    counter = make_counter(encodings)
    body = {
        "messages": [
            {"role": "user", "content": [{"type": "image_url", "image_url": {"url": png_url(800, 800)}}]}
        ]
    }
    assert counter.count_chat("gpt-4o", body).images != counter.count_chat("gpt-5", body).images


def test_counter_tools_are_cached(encodings: dict[str, Any]) -> None:
    counter = make_counter(encodings)
    body = {"messages": conversation(1), "tools": [{"type": "function", "function": {"name": "f"}}]}
    first = counter.count_chat("gpt-4o", body)
    hits = counter.cache.hits
    assert counter.count_chat("gpt-4o", body) == first
    assert counter.cache.hits == hits + 2


# -- async ------------------------------------------------------------------------------------------


class ThreadRecordingBody(Mapping[str, Any]):
    """A request body that remembers which threads read its messages."""

    def __init__(self, data: dict[str, Any]) -> None:
        self._data = data
        self.threads: set[int] = set()

    def __getitem__(self, key: str) -> Any:
        if key == "messages":
            self.threads.add(threading.get_ident())
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)


def offloading_runtime(encodings: dict[str, Any]) -> Runtime:
    """A runtime that counts bodies of 1000 bytes or more in a worker thread."""
    config = GatewayConfig.model_validate(make_config(counting={"offload_bytes": 1000}))
    return build_runtime(config, counter=make_counter(encodings))


@pytest.mark.anyio
async def test_counter_async_small_body_counts_on_the_loop(encodings: dict[str, Any]) -> None:
    runtime = offloading_runtime(encodings)
    body = ThreadRecordingBody({"messages": conversation(4)})
    count = await _count_async(runtime, CHAT, "gpt-4o", body, 999)
    assert body.threads == {threading.get_ident()}
    assert count == runtime.counter.count_chat("gpt-4o", body)


@pytest.mark.anyio
async def test_counter_async_large_body_counts_in_a_worker_thread(encodings: dict[str, Any]) -> None:
    runtime = offloading_runtime(encodings)
    body = ThreadRecordingBody({"messages": conversation(4)})
    count = await _count_async(runtime, CHAT, "gpt-4o", body, 1000)
    assert len(body.threads) == 1 and threading.get_ident() not in body.threads
    assert count == make_counter(encodings).count_chat("gpt-4o", body)


# -- embeddings, text, adapter ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body_input", "expected"),
    [
        ("hello world", 2),
        (["hello world", "hello"], 3),
        ([15339, 1917, 0], 3),
        ([[1, 2], [3]], 3),
        ([], 0),
        (None, 0),
    ],
)
def test_counter_embeddings_input(counter: TokenCounter, body_input: Any, expected: int) -> None:
    count = counter.count_embeddings("text-embedding-3-small", {"input": body_input})
    assert (count.total, count.messages, count.encoding) == (expected, expected, "cl100k_base")


def test_counter_encode_decode_round_trip(counter: TokenCounter) -> None:
    text = "Grüße, 世界! <|endoftext|> stays text"
    ids = counter.encode("gpt-4o", text)
    assert counter.decode("gpt-4o", ids) == text
    assert counter.count_text("gpt-4o", text) == len(ids)
    assert counter.encode("gpt-4o", "hello world") == [24912, 2375]
    assert counter.encode("gpt-4", "hello world") == [15339, 1917]


def test_counter_model_tokens_adapter(counter: TokenCounter) -> None:
    view = ModelTokens(counter, "gpt-4o")
    assert view.count_messages(JARGON) == counter.count_chat("gpt-4o", {"messages": JARGON}).total == 124
    assert view.count_text("hello world") == 2
    assert view.decode(view.encode("hello world")) == "hello world"


def test_counter_with_config_reuses_encodings(counter: TokenCounter) -> None:
    reloaded = counter.with_config(
        CountingConfig(cache_entries=0), {"alias": ModelConfig(provider="p", upstream_model="gpt-4")}
    )
    body = {"messages": conversation(3)}
    assert reloaded.count_chat("alias", body) == counter.count_chat("gpt-4", body)
    assert len(reloaded.cache) == 0


def test_counter_build_loads_both_encodings() -> None:
    counter = TokenCounter.build(CountingConfig(default_encoding="cl100k_base"), {})
    assert counter.count_chat("unknown", {"messages": []}).encoding == "cl100k_base"
    assert counter.count_chat("gpt-4o", {"messages": []}).encoding == "o200k_base"
