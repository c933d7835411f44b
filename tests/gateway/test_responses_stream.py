"""The Responses SSE reader: bytes pass through, usage from the final event, first output delta."""

from __future__ import annotations

import time

import orjson
import pytest

from gateway.fronts.responses.stream import ResponsesStreamReader, finish_reason_of
from tests.mock.responses import response_events, responses_answer, sse

TOOL = {"type": "function", "name": "get_weather", "parameters": {"type": "object", "properties": {}}}


@pytest.mark.parametrize("piece", [1, 7, 64, 100_000])
def test_reader_reads_usage_id_and_text_however_the_bytes_are_cut(piece: int) -> None:
    answer = responses_answer({"model": "gpt-5.4", "input": "hello there"}, number=1)
    payload = sse(response_events(answer)).replace(b"\n", b"\r\n")
    reader = ResponsesStreamReader(started=time.perf_counter())
    for start in range(0, len(payload), piece):
        reader.feed(payload[start : start + piece])
    reader.flush()
    assert reader.final
    assert reader.usage == answer["usage"]
    assert reader.response_id == answer["id"]
    assert reader.output_text == "echo: hello there"
    assert reader.finish_reason == "stop"
    assert reader.first_token_seconds is not None


def test_reader_takes_the_first_token_at_the_first_output_delta() -> None:
    answer = responses_answer({"model": "gpt-5.4", "input": "hi", "tools": [TOOL]}, number=1)
    events = list(response_events(answer))
    reader = ResponsesStreamReader(started=time.perf_counter())
    first_delta = next(i for i, event in enumerate(events) if event["type"].endswith(".delta"))
    reader.feed(sse(iter(events[:first_delta])))
    assert reader.first_token_seconds is None and reader.response_id == answer["id"]
    reader.feed(sse(iter(events[first_delta:])))
    assert reader.first_token_seconds is not None
    assert reader.finish_reason == "tool_calls"
    assert reader.output_text == '{"city": "Paris"}'


@pytest.mark.parametrize(
    ("final", "reason"),
    [
        (
            {
                "type": "response.incomplete",
                "response": {
                    "id": "r",
                    "status": "incomplete",
                    "incomplete_details": {"reason": "max_output_tokens"},
                    "usage": {"input_tokens": 5, "output_tokens": 9},
                },
            },
            "length",
        ),
        (
            {
                "type": "response.failed",
                "response": {"id": "r", "status": "failed", "usage": {"input_tokens": 5, "output_tokens": 0}},
            },
            "failed",
        ),
    ],
)
def test_reader_takes_usage_from_incomplete_and_failed_ends(final: dict[str, object], reason: str) -> None:
    reader = ResponsesStreamReader(started=time.perf_counter())
    reader.feed(b"event: " + str(final["type"]).encode() + b"\ndata: " + orjson.dumps(final))
    assert not reader.final  # not terminated yet
    reader.flush()
    assert reader.final and reader.finish_reason == reason
    assert reader.usage is not None and reader.usage["input_tokens"] == 5


def test_finish_reason_of_a_content_filtered_response() -> None:
    response = {"status": "incomplete", "incomplete_details": {"reason": "content_filter"}}
    assert finish_reason_of(response) == "content_filter"


COST = {"x_gateway_cost_usd": "0.0019", "x_gateway_saving_basis": "forwarded"}


@pytest.mark.parametrize("piece", [1, 7, 100_000])
def test_reader_passes_the_events_on_whole_with_the_final_usage_stamped(piece: int) -> None:
    answer = responses_answer({"model": "gpt-5.4", "input": "hello there"}, number=1)
    events = list(response_events(answer))
    payload = sse(iter(events))
    asked: list[dict[str, object]] = []
    reader = ResponsesStreamReader(started=time.perf_counter())
    reader.stamp = lambda usage: asked.append(usage) or COST
    out = (
        b"".join(reader.feed(payload[i : i + piece]) for i in range(0, len(payload), piece)) + reader.flush()
    )
    *before, final = events
    assert final["type"] == "response.completed"
    stamped = {**final, "response": {**final["response"], "usage": {**answer["usage"], **COST}}}
    assert out == sse(iter([*before, stamped]))  # no other event touched, and none before it is
    assert asked == [answer["usage"]] and reader.usage == answer["usage"]


def test_reader_stamps_a_final_event_left_unterminated() -> None:
    final = {
        "type": "response.incomplete",
        "response": {"id": "r", "status": "incomplete", "usage": {"input_tokens": 5}},
    }
    reader = ResponsesStreamReader(started=time.perf_counter())
    reader.stamp = lambda usage: COST
    event = b"event: response.incomplete\ndata: " + orjson.dumps(final)
    assert reader.feed(event) == b""
    stamped = {**final, "response": {**final["response"], "usage": {"input_tokens": 5, **COST}}}
    assert reader.flush() == b"event: response.incomplete\ndata: " + orjson.dumps(stamped)


def test_reader_without_fields_to_add_passes_the_final_event_as_it_came() -> None:
    answer = responses_answer({"model": "gpt-5.4", "input": "hello there"}, number=1)
    payload = sse(response_events(answer))
    reader = ResponsesStreamReader(started=time.perf_counter())
    reader.stamp = lambda usage: {}  # an unpriced model
    assert reader.feed(payload) + reader.flush() == payload
