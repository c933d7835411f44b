"""A rewritten Messages request's usage as the tenant asked it reported (``report_prompt_tokens:
received``): whole answers and the ``message_start`` / ``message_delta`` events of streams."""

from __future__ import annotations

import orjson

from gateway.fronts.messages.reply import Reporter, reported
from tests.mock.anthropic import encoded, message_events

USAGE = {
    "input_tokens": 40,
    "cache_read_input_tokens": 9000,
    "cache_creation_input_tokens": 960,
    "output_tokens": 7,
}


def test_reported_usage_shows_the_received_prompt_net_of_the_cache() -> None:
    assert reported(USAGE, 50_000) == {**USAGE, "input_tokens": 50_000 - 9000 - 960}
    assert reported({"input_tokens": 10}, 300) == {"input_tokens": 300}
    assert reported({"output_tokens": 3}, 300) == {"output_tokens": 3}  # no input to report


def test_reporter_rewrites_only_the_events_that_carry_input_usage() -> None:
    reply = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": [{"type": "text", "text": "Hello there"}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": USAGE,
    }
    events = list(message_events(reply, pieces=2))
    payload = b"".join(encoded(event) for event in events)
    reporter = Reporter(50_000)
    out = b"".join(reporter.feed(payload[start : start + 13]) for start in range(0, len(payload), 13))
    out += reporter.rest()
    relayed = [block for block in out.split(b"\n\n") if block]
    assert len(relayed) == len(events)
    for sent, original in zip(relayed, events, strict=True):
        data = orjson.loads(sent.split(b"data: ", 1)[1])
        if original["type"] == "message_start":
            assert data["message"]["usage"]["input_tokens"] == 50_000 - 9000 - 960
            assert data["message"]["usage"]["cache_read_input_tokens"] == 9000
        elif original["type"] == "message_delta":
            assert data["usage"] == {**USAGE, "input_tokens": 50_000 - 9000 - 960}
        else:
            assert sent == encoded(original).rstrip(b"\n")  # every other event byte for byte
