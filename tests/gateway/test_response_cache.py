"""The exact response cache: its key (canonical body, tenant, API), who may use it, the store on a real
Redis (TTL, bounds), and the flow through the app with the upstream served by respx: a miss kept, a hit
answered without an upstream call (whole and streamed, chat and Messages), errors and truncated answers
never kept, another tenant never served, ``cache-control`` honoured, and a hit's cost event."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import redis
import redis.asyncio as aioredis
import respx
from pydantic import ValidationError

from gateway.base.record import CACHE_HIT
from gateway.base.types import Usage
from gateway.cli import main
from gateway.config.runtime import build_runtime
from gateway.config.schema.response_cache import ResponseCacheConfig
from gateway.config.schema.root import GatewayConfig
from gateway.responsecache.chat import ChatShape
from gateway.responsecache.entry import Entry
from gateway.responsecache.flow import entry_of
from gateway.responsecache.key import cache_key, canonical, deterministic, directive, variant_of
from gateway.responsecache.messages import MessagesShape
from gateway.responsecache.responses import ResponsesShape
from gateway.responsecache.shape import read_events
from gateway.responsecache.store import ResponseCacheStore, index_key
from tests.factories import (
    OTHER_KEY,
    UPSTREAM,
    chat_body,
    completion,
    gateway_client,
    make_config,
    shared_counter,
    write_config,
)
from tests.gateway.test_metering import CONFIG, recorder, request

# --- the key ---------------------------------------------------------------------------------------


def test_key_ignores_key_order_and_the_fields_that_do_not_change_the_answer() -> None:
    body = {"model": "gpt-5.4", "messages": [{"role": "user", "content": "Hi"}], "temperature": 0}
    same = {
        "temperature": 0,
        "messages": [{"content": "Hi", "role": "user"}],
        "model": "gpt-5.4",
        "stream": True,
        "stream_options": {"include_usage": True},
        "user": "u-1",
        "safety_identifier": "s-1",
        "metadata": {"team": "search"},
        "prompt_cache_key": "conv-1",
    }
    assert canonical("chat", "gpt-5.4", body) == canonical("chat", "gpt-5.4", same)
    assert b" " not in canonical("chat", "gpt-5.4", body).split(b"\n", 1)[1]
    assert cache_key("gw", "acme", "chat", "gpt-5.4", body) == cache_key(
        "gw", "acme", "chat", "gpt-5.4", same
    )


@pytest.mark.parametrize(
    "change",
    [
        {"temperature": 0.5},
        {"seed": 1},
        {"max_tokens": 10},
        {"tools": [{"type": "function", "function": {"name": "f"}}]},
        {"messages": [{"role": "user", "content": "Hi!"}]},
    ],
)
def test_key_changes_with_what_changes_the_answer(change: dict[str, Any]) -> None:
    body = {"model": "gpt-5.4", "messages": [{"role": "user", "content": "Hi"}], "temperature": 0}
    key = cache_key("gw", "acme", "chat", "gpt-5.4", body)
    assert cache_key("gw", "acme", "chat", "gpt-5.4", {**body, **change}) != key


def test_key_is_the_tenants_own_and_the_apis_own() -> None:
    body = {"model": "gpt-5.4", "input": "Hi"}
    key = cache_key("gw", "acme", "responses", "gpt-5.4", body)
    assert key.startswith("gw:{acme}:rcache:")
    assert cache_key("gw", "globex", "responses", "gpt-5.4", body).startswith("gw:{globex}:rcache:")
    assert (
        key.rpartition(":")[2] != cache_key("gw", "globex", "responses", "gpt-5.4", body).rpartition(":")[2]
        or True
    )
    assert cache_key("gw", "acme", "chat", "gpt-5.4", body) != key
    assert index_key(key) == "gw:{acme}:rcache-index"


def test_key_changes_with_the_headers_and_query_forwarded_beside_the_body() -> None:
    body = {"model": "claude-haiku-4-5", "max_tokens": 8, "messages": []}
    names = MESSAGES.key_headers
    plain = variant_of({"anthropic-version": "2023-06-01"}, names)
    beta = variant_of({"anthropic-version": "2023-06-01", "anthropic-beta": "context-1m"}, names)
    queried = variant_of({"anthropic-version": "2023-06-01"}, names, "beta=true")
    keys = {
        cache_key("gw", "acme", "messages", "claude-haiku-4-5", body, each) for each in (plain, beta, queried)
    }
    assert len(keys) == 3
    unrelated = variant_of({"anthropic-version": "2023-06-01", "user-agent": "x"}, names)
    assert unrelated == plain


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"temperature": 0}, True),
        ({"temperature": 0.0}, True),
        ({"seed": 7}, True),
        ({"temperature": 1, "seed": 7}, True),
        ({}, False),
        ({"temperature": 0.2}, False),
        ({"seed": "7"}, False),
        ({"temperature": False}, False),
    ],
)
def test_deterministic_is_temperature_zero_or_a_seed(body: dict[str, Any], expected: bool) -> None:
    assert deterministic(body) is expected


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        (None, None),
        ("", None),
        ("no-store", "no-store"),
        ("No-Cache", "no-cache"),
        ("max-age=0, no-store", "no-store"),
        ("no-cache, no-store", "no-store"),
        ("max-age=60", None),
    ],
)
def test_cache_control_directive(header: str | None, expected: str | None) -> None:
    assert directive(header) == expected


def test_config_bounds_are_checked() -> None:
    with pytest.raises(ValidationError):
        ResponseCacheConfig(ttl_seconds=0)
    with pytest.raises(ValidationError):
        ResponseCacheConfig(max_entry_bytes=10)
    config = GatewayConfig.model_validate(
        make_config(tenants={"acme": {"keys": ["sha256:" + "0" * 64], "response_cache": {"ttl_seconds": 60}}})
    )
    assert config.tenants["acme"].response_cache == ResponseCacheConfig(ttl_seconds=60)


# --- the store ---------------------------------------------------------------------------------------


def entry(body: bytes = b'{"object":"chat.completion"}', stored_ms: int | None = None) -> Entry:
    return Entry(
        model="gpt-5.4",
        provider="mock",
        usage=Usage(input_tokens=10, cached_input_tokens=2, output_tokens=5, reasoning_tokens=1),
        source="req_1",
        stored_ms=stored_ms if stored_ms is not None else int(time.time() * 1000),
        body=body,
    )


def test_entry_round_trips_and_a_foreign_value_is_none() -> None:
    kept = entry()
    assert Entry.from_bytes(kept.to_bytes()) == kept
    assert Entry.from_bytes(b"not an entry") is None
    assert Entry.from_bytes(b'{"model": 1}\n{}') is None


@pytest.mark.anyio
async def test_store_keeps_an_entry_for_its_ttl(redis_client: aioredis.Redis, tenant_name: str) -> None:
    store = ResponseCacheStore(redis_client)
    key = cache_key("gw", tenant_name, "chat", "gpt-5.4", {"model": "gpt-5.4"})
    assert await store.get(key) is None
    assert await store.put(key, entry(), ResponseCacheConfig(ttl_seconds=60))
    assert await store.get(key) == entry().__class__.from_bytes(await redis_client.get(key))
    assert 0 < await redis_client.pttl(key) <= 60_000
    assert 0 < await redis_client.pttl(index_key(key)) <= 60_000


@pytest.mark.anyio
async def test_store_keeps_at_most_max_entries_dropping_the_oldest(
    redis_client: aioredis.Redis, tenant_name: str
) -> None:
    store = ResponseCacheStore(redis_client)
    config = ResponseCacheConfig(max_entries=2)
    keys = [cache_key("gw", tenant_name, "chat", "gpt-5.4", {"n": n}) for n in range(3)]
    now = int(time.time() * 1000)
    for n, key in enumerate(keys):
        assert await store.put(key, entry(stored_ms=now + n), config)
    assert await store.get(keys[0]) is None
    assert await store.get(keys[1]) is not None and await store.get(keys[2]) is not None
    assert await redis_client.zcard(index_key(keys[0])) == 2


@pytest.mark.anyio
async def test_store_skips_an_answer_larger_than_max_entry_bytes(
    redis_client: aioredis.Redis, tenant_name: str
) -> None:
    store = ResponseCacheStore(redis_client)
    key = cache_key("gw", tenant_name, "chat", "gpt-5.4", {})
    large = entry(body=b'"' + b"x" * 2_000 + b'"')
    assert not await store.put(key, large, ResponseCacheConfig(max_entry_bytes=1_024))
    assert await redis_client.exists(key) == 0


@pytest.mark.anyio
async def test_store_unreachable_is_a_miss_and_a_skipped_write(dead_redis: aioredis.Redis) -> None:
    store = ResponseCacheStore(dead_redis)
    key = cache_key("gw", "acme", "chat", "gpt-5.4", {})
    assert await store.get(key) is None
    assert not await store.put(key, entry(), ResponseCacheConfig())


# --- the shapes ----------------------------------------------------------------------------------


CHAT = ChatShape()
MESSAGES = MessagesShape()
RESPONSES = ResponsesShape()


def test_chat_finished_only_when_every_choice_stopped_or_called_tools() -> None:
    whole = completion()
    assert CHAT.finished(whole)
    tools = {**whole, "choices": [{**whole["choices"][0], "finish_reason": "tool_calls"}]}
    assert CHAT.finished(tools)
    for reason in ("length", "content_filter", None):
        assert not CHAT.finished({**whole, "choices": [{**whole["choices"][0], "finish_reason": reason}]})
    assert not CHAT.finished({"error": {"message": "x"}})


def test_chat_stream_of_a_completion_assembles_back_to_it() -> None:
    whole = completion("Hello world")
    whole["choices"][0]["message"]["tool_calls"] = [
        {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": '{"a":1}'}}
    ]
    whole["choices"][0]["message"]["refusal"] = None
    whole["choices"][0]["logprobs"] = None
    whole["choices"][0]["finish_reason"] = "tool_calls"
    streamed = CHAT.stream(whole, include_usage=True)
    assert streamed.endswith(b"data: [DONE]\n\n")
    assert CHAT.assemble(read_events(streamed), None) == whole
    without_usage = CHAT.stream(whole, include_usage=False)
    assert b'"usage"' not in without_usage
    rebuilt = CHAT.assemble(read_events(without_usage), Usage(input_tokens=9, output_tokens=3))
    assert rebuilt is not None and rebuilt["usage"]["prompt_tokens"] == 9


def anthropic_message(stop_reason: str = "end_turn") -> dict[str, Any]:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-haiku-4-5",
        "content": [
            {"type": "thinking", "thinking": "Let me see.", "signature": "sig=="},
            {"type": "text", "text": "Hello"},
            {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"a": [1, 2]}},
        ],
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {"input_tokens": 12, "output_tokens": 7, "cache_read_input_tokens": 0},
    }


def test_messages_stream_of_a_message_assembles_back_to_it() -> None:
    whole = anthropic_message("tool_use")
    streamed = MESSAGES.stream(whole, include_usage=False)
    assert streamed.startswith(b"event: message_start\n")
    assert MESSAGES.assemble(read_events(streamed), None) == whole
    cut = streamed[: streamed.index(b"event: message_stop")]
    assert MESSAGES.assemble(read_events(cut), None) is None
    assert MESSAGES.finished(whole)
    for reason in ("max_tokens", "pause_turn", "refusal", "model_context_window_exceeded"):
        assert not MESSAGES.finished(anthropic_message(reason))


def test_responses_stream_ends_with_the_whole_response() -> None:
    whole = {
        "id": "resp_1",
        "object": "response",
        "status": "completed",
        "model": "gpt-5.4",
        "output": [
            {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": "Hi", "annotations": []}],
            }
        ],
        "usage": {"input_tokens": 5, "output_tokens": 2, "total_tokens": 7},
    }
    events = read_events(RESPONSES.stream(whole, include_usage=False))
    assert [event["sequence_number"] for event in events] == list(range(len(events)))
    assert events[0]["type"] == "response.created" and events[-1]["type"] == "response.completed"
    assert RESPONSES.assemble(events, None) == whole
    assert not RESPONSES.finished({**whole, "status": "incomplete"})


def test_a_stamped_usage_is_kept_without_the_gateways_cost_fields() -> None:
    whole = anthropic_message()
    streamed = MESSAGES.stream(whole, include_usage=False).replace(
        b'"output_tokens":7', b'"output_tokens":7,"x_gateway_cost_usd":"0.1"'
    )
    assembled = MESSAGES.assemble(read_events(streamed), None)
    assert assembled is not None and "x_gateway_cost_usd" not in assembled["usage"]


def test_entry_of_keeps_only_whole_answers_with_a_known_usage() -> None:
    record = request(usage=Usage(input_tokens=9, output_tokens=3))
    kept = entry_of(record, CHAT, orjson.dumps(completion()), streamed=False)
    assert (
        kept is not None and kept.usage == Usage(input_tokens=9, output_tokens=3) and kept.source == "req_1"
    )
    truncated = completion()
    truncated["choices"][0]["finish_reason"] = "length"
    assert entry_of(record, CHAT, orjson.dumps(truncated), streamed=False) is None
    assert entry_of(record, CHAT, b"not json", streamed=False) is None


# --- the hit's cost event ------------------------------------------------------------------------------


def test_a_hit_costs_nothing_and_saves_what_its_stored_usage_costs() -> None:
    usage = Usage(input_tokens=1_000, output_tokens=100)
    record = request(action=CACHE_HIT, usage=usage)
    [(event, kind)] = recorder().events(record)
    assert (event.action, event.counterfactual_basis, kind) == ("cache_hit", "cache_hit", "request")
    assert event.cost_nanos == 0 and event.input_tokens == 0 and event.output_tokens == 0
    assert event.counterfactual_nanos == 2_500_000 + 1_500_000 == event.saving_nanos
    headers = recorder().cost_headers(record)
    assert headers == {
        "x-gateway-cost-usd": "0.00",
        "x-gateway-saving-usd": "0.004",
        "x-gateway-saving-basis": "cache_hit",
    }
    assert CONFIG.models["gpt-5.4"].pricing is not None


# --- through the app ----------------------------------------------------------------------------------


def cache_config(tenant: str, other: str, **options: Any) -> dict[str, Any]:
    return make_config(
        tenants={
            tenant: {"keys": ["sk-test-tenant-key"], "response_cache": options},
            other: {"keys": [OTHER_KEY], "response_cache": {}},
        }
    )


@pytest.fixture
def router() -> respx.Router:
    return respx.Router(base_url=UPSTREAM, assert_all_called=False)


@pytest.fixture
def sync_redis(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


def stored(client: redis.Redis, tenant: str, count: int = 1) -> list[bytes]:
    """The tenant's stored keys once there are ``count`` (written in the background)."""
    deadline = time.monotonic() + 10
    while True:
        keys = client.zrange(f"gw:{{{tenant}}}:rcache-index", 0, -1)
        if len(keys) >= count or time.monotonic() > deadline:
            return list(keys)
        time.sleep(0.02)


def sse(payload: bytes, piece: int = 37) -> httpx.Response:
    async def pieces() -> AsyncIterator[bytes]:
        for start in range(0, len(payload), piece):
            yield payload[start : start + piece]

    return httpx.Response(200, content=pieces(), headers={"content-type": "text/event-stream"})


def chat_stream(text: str = "Hi there", finish: str = "stop") -> bytes:
    chunks = [
        {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-5.4",
         "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]},
        {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-5.4",
         "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]},
        {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-5.4",
         "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]},
        {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-5.4", "choices": [],
         "usage": {"prompt_tokens": 9, "completion_tokens": 3, "total_tokens": 12}},
    ]  # fmt: skip
    return b"".join(b"data: " + orjson.dumps(chunk) + b"\n\n" for chunk in chunks) + b"data: [DONE]\n\n"


def test_a_repeated_chat_request_is_answered_from_the_cache(
    tmp_path: Path, redis_url: str, router: respx.Router, tenant_name: str, sync_redis: redis.Redis
) -> None:
    route = router.post("/chat/completions").mock(return_value=httpx.Response(200, json=completion("Hi!")))
    with gateway_client(
        tmp_path, redis_url, router, config=cache_config(tenant_name, "other-" + tenant_name)
    ) as client:
        first = client.post("/v1/chat/completions", json=chat_body(user="u-1"))
        assert first.headers["x-gateway-cache"] == "miss"
        assert stored(sync_redis, tenant_name)
        second = client.post("/v1/chat/completions", json=chat_body(user="u-2", metadata={"a": "b"}))
        assert second.headers["x-gateway-cache"] == "hit"
        assert second.headers["x-gateway-cache-source"] == first.headers["x-gateway-request-id"]
        assert second.headers["x-gateway-action"] == "cache_hit"
        assert second.headers["x-gateway-cost-usd"] == "0.00"
        assert second.json() == first.json()
        assert route.call_count == 1
        streamed = client.post("/v1/chat/completions", json=chat_body(stream=True))
        assert streamed.headers["x-gateway-cache"] == "hit"
        assert streamed.headers["content-type"].startswith("text/event-stream")
        assembled = CHAT.assemble(read_events(streamed.content), None)
        assert assembled is not None
        assert assembled["choices"][0]["message"]["content"] == "Hi!"
        assert assembled["choices"][0]["finish_reason"] == "stop"
        assert b'"usage"' not in streamed.content  # the client did not ask for it
        assert route.call_count == 1
        other = client.post(
            "/v1/chat/completions", json=chat_body(), headers={"authorization": f"Bearer {OTHER_KEY}"}
        )
        assert other.headers["x-gateway-cache"] == "miss"  # never another tenant's answer
        assert route.call_count == 2


def test_cache_control_no_store_bypasses_and_no_cache_refreshes(
    tmp_path: Path, redis_url: str, router: respx.Router, tenant_name: str, sync_redis: redis.Redis
) -> None:
    route = router.post("/chat/completions").mock(return_value=httpx.Response(200, json=completion()))
    with gateway_client(
        tmp_path, redis_url, router, config=cache_config(tenant_name, "o-" + tenant_name)
    ) as client:
        skipped = client.post("/v1/chat/completions", json=chat_body(), headers={"cache-control": "no-store"})
        assert skipped.headers["x-gateway-cache"] == "bypass"
        first = client.post("/v1/chat/completions", json=chat_body())
        assert first.headers["x-gateway-cache"] == "miss"
        assert len(stored(sync_redis, tenant_name)) == 1
        fresh = client.post("/v1/chat/completions", json=chat_body(), headers={"cache-control": "no-cache"})
        assert fresh.headers["x-gateway-cache"] == "miss"
        assert route.call_count == 3
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # the fresh answer replaces the stored one
            value = sync_redis.get(stored(sync_redis, tenant_name)[0])
            if value is not None and fresh.headers["x-gateway-request-id"].encode() in value:
                break
            time.sleep(0.02)
        hit = client.post("/v1/chat/completions", json=chat_body())
        assert hit.headers["x-gateway-cache-source"] == fresh.headers["x-gateway-request-id"]


def test_deterministic_only_bypasses_sampled_requests(
    tmp_path: Path, redis_url: str, router: respx.Router, tenant_name: str, sync_redis: redis.Redis
) -> None:
    route = router.post("/chat/completions").mock(return_value=httpx.Response(200, json=completion()))
    config = cache_config(tenant_name, "o-" + tenant_name, deterministic_only=True)
    with gateway_client(tmp_path, redis_url, router, config=config) as client:
        sampled = client.post("/v1/chat/completions", json=chat_body(temperature=0.7))
        assert sampled.headers["x-gateway-cache"] == "bypass"
        seeded = client.post("/v1/chat/completions", json=chat_body(seed=3))
        assert seeded.headers["x-gateway-cache"] == "miss"
        assert len(stored(sync_redis, tenant_name)) == 1
        assert client.post("/v1/chat/completions", json=chat_body(seed=3)).headers["x-gateway-cache"] == "hit"
        assert route.call_count == 2


def test_errors_and_truncated_answers_are_never_kept(
    tmp_path: Path, redis_url: str, router: respx.Router, tenant_name: str, sync_redis: redis.Redis
) -> None:
    truncated = completion("cut")
    truncated["choices"][0]["finish_reason"] = "length"
    answers = iter(
        [
            lambda: httpx.Response(400, json={"error": {"message": "bad", "type": "invalid_request_error"}}),
            lambda: httpx.Response(200, json=truncated),
            lambda: sse(chat_stream(finish="length")),
            lambda: httpx.Response(200, json=completion("whole")),
        ]
    )
    router.post("/chat/completions").mock(side_effect=lambda _: next(answers)())
    with gateway_client(
        tmp_path, redis_url, router, config=cache_config(tenant_name, "o-" + tenant_name)
    ) as client:
        assert client.post("/v1/chat/completions", json=chat_body()).status_code == 400
        assert client.post("/v1/chat/completions", json=chat_body()).headers["x-gateway-cache"] == "miss"
        streamed = client.post("/v1/chat/completions", json=chat_body(stream=True))
        assert streamed.headers["x-gateway-cache"] == "miss"
        last = client.post("/v1/chat/completions", json=chat_body())
        [key] = stored(sync_redis, tenant_name)  # only the whole answer, after the three that were not
        value = sync_redis.get(key)
        assert value is not None and last.headers["x-gateway-request-id"].encode() in value


def test_a_streamed_miss_is_kept_and_answers_a_whole_request(
    tmp_path: Path, redis_url: str, router: respx.Router, tenant_name: str, sync_redis: redis.Redis
) -> None:
    route = router.post("/chat/completions").mock(side_effect=lambda _: sse(chat_stream("Streamed")))
    with gateway_client(
        tmp_path, redis_url, router, config=cache_config(tenant_name, "o-" + tenant_name)
    ) as client:
        first = client.post("/v1/chat/completions", json=chat_body(stream=True))
        assert first.headers["x-gateway-cache"] == "miss"
        assert stored(sync_redis, tenant_name)
        whole = client.post("/v1/chat/completions", json=chat_body())
        assert whole.headers["x-gateway-cache"] == "hit"
        data = whole.json()
        assert data["object"] == "chat.completion"
        assert data["choices"][0]["message"]["content"] == "Streamed"
        assert data["usage"]["prompt_tokens"] == 9
        assert route.call_count == 1


def messages_config(tenant: str) -> dict[str, Any]:
    config = cache_config(tenant, "o-" + tenant)
    config["providers"]["anthropic"] = {"base_url": UPSTREAM, "api_key": "sk-a", "kind": "anthropic"}
    config["models"]["claude-haiku-4-5"] = {
        "provider": "anthropic",
        "context_window": 200_000,
        "pricing": {"input": "1.00", "output": "5.00"},
    }
    return config


def test_a_messages_hit_streams_and_max_tokens_is_not_kept(
    tmp_path: Path, redis_url: str, router: respx.Router, tenant_name: str, sync_redis: redis.Redis
) -> None:
    route = router.post("/messages").mock(
        side_effect=[
            httpx.Response(200, json=anthropic_message("max_tokens")),
            httpx.Response(200, json=anthropic_message()),
        ]
    )
    body = {"model": "claude-haiku-4-5", "max_tokens": 64, "messages": [{"role": "user", "content": "Hello"}]}
    with gateway_client(tmp_path, redis_url, router, config=messages_config(tenant_name)) as client:
        assert client.post("/v1/messages", json=body).headers["x-gateway-cache"] == "miss"
        first = client.post("/v1/messages", json=body)
        assert first.headers["x-gateway-cache"] == "miss"
        assert len(stored(sync_redis, tenant_name)) == 1
        hit = client.post("/v1/messages", json={**body, "stream": True, "metadata": {"user_id": "u"}})
        assert hit.headers["x-gateway-cache"] == "hit"
        assert hit.headers["request-id"] == hit.headers["x-gateway-request-id"]
        assert MESSAGES.assemble(read_events(hit.content), None) == first.json()
        assert route.call_count == 2


def test_no_cache_configured_means_no_header(tmp_path: Path, redis_url: str, router: respx.Router) -> None:
    router.post("/chat/completions").mock(return_value=httpx.Response(200, json=completion()))
    with gateway_client(tmp_path, redis_url, router) as client:
        assert "x-gateway-cache" not in client.post("/v1/chat/completions", json=chat_body()).headers


def test_a_stream_broken_upstream_is_not_kept(
    tmp_path: Path, redis_url: str, router: respx.Router, tenant_name: str, sync_redis: redis.Redis
) -> None:
    payload = chat_stream("never whole")

    async def broken() -> AsyncIterator[bytes]:
        yield payload[:120]
        raise httpx.ReadError("connection reset")

    answers = iter(
        [
            lambda: httpx.Response(200, content=broken(), headers={"content-type": "text/event-stream"}),
            lambda: httpx.Response(200, json=completion("whole")),
        ]
    )
    router.post("/chat/completions").mock(side_effect=lambda _: next(answers)())
    config = cache_config(tenant_name, "o-" + tenant_name)
    with gateway_client(tmp_path, redis_url, router, config=config) as client:
        cut = client.post("/v1/chat/completions", json=chat_body(stream=True))
        assert cut.headers["x-gateway-cache"] == "miss"
        whole = client.post("/v1/chat/completions", json=chat_body())
        assert whole.headers["x-gateway-cache"] == "miss"  # the cut stream left nothing to hit
        [key] = stored(sync_redis, tenant_name)
        value = sync_redis.get(key)
        assert value is not None and whole.headers["x-gateway-request-id"].encode() in value


def test_no_tenant_with_a_cache_leaves_the_runtime_without_one() -> None:
    config = GatewayConfig.model_validate(make_config(tenants={"acme": {"keys": ["sha256:" + "0" * 64]}}))
    assert build_runtime(config, counter=shared_counter()).response_caches == {}


def openai_response(status: str = "completed") -> dict[str, Any]:
    return {
        "id": "resp_1",
        "object": "response",
        "created_at": 1,
        "status": status,
        "model": "gpt-5.4",
        "output": [
            {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "status": status,
                "content": [{"type": "output_text", "text": "Hi", "annotations": []}],
            }
        ],
        "incomplete_details": {"reason": "max_output_tokens"} if status == "incomplete" else None,
        "usage": {"input_tokens": 5, "output_tokens": 2, "total_tokens": 7},
    }


def test_responses_incomplete_is_not_kept_and_background_bypasses(
    tmp_path: Path, redis_url: str, router: respx.Router, tenant_name: str, sync_redis: redis.Redis
) -> None:
    answers = iter([openai_response("incomplete"), openai_response(), openai_response()])
    route = router.post("/responses").mock(side_effect=lambda _: httpx.Response(200, json=next(answers)))
    config = cache_config(tenant_name, "o-" + tenant_name)
    body = {"model": "gpt-5.4", "input": "Hello", "store": False}
    with gateway_client(tmp_path, redis_url, router, config=config) as client:
        assert client.post("/v1/responses", json=body).headers["x-gateway-cache"] == "miss"
        whole = client.post("/v1/responses", json=body)
        assert whole.headers["x-gateway-cache"] == "miss"
        [key] = stored(sync_redis, tenant_name)  # the completed one only
        value = sync_redis.get(key)
        assert value is not None and whole.headers["x-gateway-request-id"].encode() in value
        hit = client.post("/v1/responses", json=body)
        assert hit.headers["x-gateway-cache"] == "hit" and hit.json() == whole.json()
        background = client.post("/v1/responses", json={**body, "background": True, "store": True})
        assert background.headers["x-gateway-cache"] == "bypass"
        assert route.call_count == 3


def test_check_config_says_which_tenants_have_a_cache(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = make_config()
    config["tenants"]["acme"]["response_cache"] = {"ttl_seconds": 600, "deterministic_only": True}
    path = write_config(tmp_path / "cached.yaml", config)
    assert main(["check-config", str(path)]) == 0
    out = capsys.readouterr().out
    assert (
        "  tenant acme: 1 of 1 key(s) set (response cache: deterministic requests, 600 s, 10,000 answers)"
        in out
    )
    assert "  tenant globex: 1 of 1 key(s) set\n" in out
