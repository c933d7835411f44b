"""Reading an Anthropic event stream on the side: cumulative usage, stop reason, first delta, errors."""

from __future__ import annotations

import time
from typing import Any

import orjson
import pytest

from gateway.fronts.messages.stream import MessagesStreamReader, finish_reason_of, merged_usage
from tests.mock.anthropic import encoded, message_events, sse

START_USAGE = {
    "input_tokens": 12,
    "cache_creation_input_tokens": 2048,
    "cache_read_input_tokens": 4096,
    "cache_creation": {"ephemeral_5m_input_tokens": 2048, "ephemeral_1h_input_tokens": 0},
    "output_tokens": 1,
}


def reply(usage: dict[str, Any] | None = None, content: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": content or [{"type": "text", "text": "Hello there, how are you?"}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": usage or {**START_USAGE, "output_tokens": 9},
    }


def read(payload: bytes, piece: int = 7) -> MessagesStreamReader:
    reader = MessagesStreamReader(started=time.perf_counter())
    for start in range(0, len(payload), piece):
        reader.feed(payload[start : start + piece])
    reader.flush()
    return reader


def test_reader_takes_the_usage_of_message_start_and_the_last_message_delta() -> None:
    events = [
        {"type": "message_start", "message": {**reply(), "content": [], "usage": START_USAGE}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi"}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": None}, "usage": {"output_tokens": 5}},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn", "stop_sequence": None},
            "usage": {"output_tokens": 40, "cache_read_input_tokens": 4096},
        },
        {"type": "message_stop"},
    ]
    reader = read(b"".join(encoded(event) for event in events))
    assert reader.usage is not None
    assert reader.usage["output_tokens"] == 40  # the last cumulative value, not 1 + 5 + 40
    assert reader.usage["cache_read_input_tokens"] == 4096  # sent twice, counted once
    assert reader.usage["cache_creation_input_tokens"] == 2048  # kept from message_start
    assert reader.usage["input_tokens"] == 12
    assert reader.finish_reason == "stop" and reader.stop_reason == "end_turn"
    assert reader.final and reader.message_id == "msg_1" and reader.error is None
    assert reader.output_text == "Hi"


def test_reader_reads_the_mock_stream_whatever_the_chunking() -> None:
    content = [
        {"type": "thinking", "thinking": "Let me think.", "signature": "c2ln"},
        {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}},
    ]
    payload = sse(message_events({**reply(content=content), "stop_reason": "tool_use"}, pieces=3))
    for piece in (1, 5, 64, len(payload)):
        reader = read(payload, piece)
        assert reader.finish_reason == "tool_calls"
        assert reader.usage == {**START_USAGE, "output_tokens": 9}
        assert reader.output_text == 'Let me think.{"city":"Paris"}'  # the signature is not output text


def test_reader_reads_crlf_line_ends() -> None:
    payload = sse(message_events(reply())).replace(b"\n", b"\r\n")
    reader = read(payload, 11)
    assert reader.final and reader.output_text == "Hello there, how are you?"


def test_reader_takes_time_to_first_token_at_the_first_content_delta() -> None:
    reader = MessagesStreamReader(started=time.perf_counter())
    head = [
        {"type": "message_start", "message": {**reply(), "content": []}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "ping"},
    ]
    reader.feed(b"".join(encoded(event) for event in head))
    assert reader.first_token_seconds is None
    reader.feed(
        encoded({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "x"}})
    )
    first = reader.first_token_seconds
    assert first is not None and first >= 0
    reader.feed(
        encoded({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "y"}})
    )
    assert reader.first_token_seconds == first


def test_reader_records_an_error_event_after_the_200() -> None:
    events = [
        {"type": "message_start", "message": {**reply(), "content": []}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "par"}},
        {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
    ]
    reader = read(b"".join(encoded(event) for event in events))
    assert reader.error == {"type": "overloaded_error", "message": "Overloaded"}
    assert not reader.final and reader.finish_reason is None


def test_reader_ignores_what_it_cannot_read() -> None:
    payload = b"event: ping\ndata: {not json\n\n: a comment\n\ndata: [1, 2]\n\n" + sse(
        message_events(reply())
    )
    reader = read(payload)
    assert reader.final and reader.usage is not None


@pytest.mark.parametrize(
    ("stop_reason", "finish"),
    [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("tool_use", "tool_calls"),
        ("max_tokens", "length"),
        ("refusal", "content_filter"),
        ("pause_turn", "pause_turn"),
        (None, None),
    ],
)
def test_finish_reason_of_speaks_chat(stop_reason: str | None, finish: str | None) -> None:
    assert finish_reason_of(stop_reason) == finish


def test_merged_usage_replaces_and_never_adds() -> None:
    merged = merged_usage({"input_tokens": 3, "output_tokens": 1}, {"output_tokens": 7, "input_tokens": None})
    assert merged == {"input_tokens": 3, "output_tokens": 7}
    assert merged_usage(None, "not an object") is None
    assert orjson.dumps(merged_usage(None, {"output_tokens": 2})) == b'{"output_tokens":2}'


COST = {"x_gateway_cost_usd": "0.0019", "x_gateway_saving_basis": "forwarded"}


@pytest.mark.parametrize("piece", [1, 7, 100_000])
def test_reader_passes_the_events_on_whole_with_the_message_delta_usage_stamped(piece: int) -> None:
    events = list(message_events(reply()))
    payload = sse(iter(events))
    asked: list[dict[str, Any]] = []
    reader = MessagesStreamReader(started=time.perf_counter())
    reader.stamp = lambda usage: asked.append(usage) or COST
    out = (
        b"".join(reader.feed(payload[i : i + piece]) for i in range(0, len(payload), piece)) + reader.flush()
    )
    [at] = [n for n, event in enumerate(events) if event["type"] == "message_delta"]
    stamped = {**events[at], "usage": {**events[at]["usage"], **COST}}
    assert out == sse(iter([*events[:at], stamped, *events[at + 1 :]]))
    assert asked == [reader.usage] == [{**START_USAGE, "output_tokens": 9}]  # the totals, as the ledger's


def test_reader_stamps_a_message_delta_left_unterminated() -> None:
    delta = {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 4}}
    reader = MessagesStreamReader(started=time.perf_counter())
    reader.stamp = lambda usage: COST
    assert reader.feed(encoded(delta).rstrip(b"\n")) == b""
    stamped = {**delta, "usage": {"output_tokens": 4, **COST}}
    assert reader.flush() == encoded(stamped).rstrip(b"\n")
