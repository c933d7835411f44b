"""Streaming relay: bytes pass through, usage is learnt on the side, the usage chunk is stripped when the
gateway asked for it on the client's behalf."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import orjson
import pytest
import respx

from gateway.core.streaming import ChatStreamReader
from tests.factories import UPSTREAM, chat_body, gateway_client

USAGE = {"prompt_tokens": 11, "completion_tokens": 2, "total_tokens": 13}


def sse(*chunks: dict[str, object], done: bool = True) -> bytes:
    out = b"".join(b"data: " + orjson.dumps(chunk) + b"\n\n" for chunk in chunks)
    return out + (b"data: [DONE]\n\n" if done else b"")


def delta(content: str | None = None, finish: str | None = None) -> dict[str, object]:
    d = {"content": content} if content is not None else {}
    return {
        "id": "c",
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": d, "finish_reason": finish}],
    }


STREAM = sse(delta("Hel"), delta("lo"), delta(finish="stop"), {"id": "c", "choices": [], "usage": USAGE})


def test_reader_strips_usage_chunk_and_learns_usage() -> None:
    reader = ChatStreamReader(strip_usage_chunk=True, started=time.perf_counter())
    out = b"".join(reader.feed(STREAM[i : i + 7]) for i in range(0, len(STREAM), 7)) + reader.flush()
    assert out == sse(delta("Hel"), delta("lo"), delta(finish="stop"))
    assert reader.usage == USAGE
    assert reader.finish_reason == "stop"
    assert reader.output_text == "Hello"
    assert reader.first_token_seconds is not None
    assert reader.done


def test_reader_keeps_usage_chunk_when_client_asked() -> None:
    reader = ChatStreamReader(strip_usage_chunk=False, started=time.perf_counter())
    assert reader.feed(STREAM) + reader.flush() == STREAM
    assert reader.usage == USAGE


def with_null_usage(chunk: dict[str, object]) -> dict[str, object]:
    """A chunk as the upstream sends it when asked for usage: ``"usage": null`` in all but the last."""
    return {**chunk, "usage": None}


ASKED = sse(
    with_null_usage(delta("Hel")),
    with_null_usage(delta('"usage":null, in the text')),
    with_null_usage(delta(finish="stop")),
    {"id": "c", "choices": [], "usage": USAGE},
)


@pytest.mark.parametrize("piece", [1, 7, len(ASKED)])
def test_reader_removes_the_null_usage_key_the_gateway_asked_for(piece: int) -> None:
    reader = ChatStreamReader(strip_usage_chunk=True, started=time.perf_counter())
    out = b"".join(reader.feed(ASKED[i : i + piece]) for i in range(0, len(ASKED), piece)) + reader.flush()
    assert out == sse(delta("Hel"), delta('"usage":null, in the text'), delta(finish="stop"))
    assert reader.usage == USAGE


def test_reader_removes_a_leading_null_usage_key_and_one_in_an_unterminated_tail() -> None:
    reader = ChatStreamReader(strip_usage_chunk=True, started=time.perf_counter())
    first = b'data: {"usage": null, "id":"c","choices":[{"index":0,"delta":{"content":"a"}}]}\n\n'
    tail = b'data: {"id":"c","choices":[{"index":0,"delta":{"content":"b"}}],"usage":null}'
    out = reader.feed(first + tail) + reader.flush()
    assert out == (
        b'data: {"id":"c","choices":[{"index":0,"delta":{"content":"a"}}]}\n\n'
        b'data: {"id":"c","choices":[{"index":0,"delta":{"content":"b"}}]}'
    )


def test_reader_keeps_the_null_usage_key_when_the_client_asked() -> None:
    reader = ChatStreamReader(strip_usage_chunk=False, started=time.perf_counter(), report_prompt_tokens=5)
    out = reader.feed(ASKED) + reader.flush()
    assert out.count(b'"usage":null') == 3


def test_reader_handles_a_crlf_cut_between_two_chunks() -> None:
    reader = ChatStreamReader(strip_usage_chunk=True, started=time.perf_counter())
    text = STREAM.replace(b"\n", b"\r\n")
    cuts = [i + 1 for i in range(len(text)) if text[i : i + 1] == b"\r"]  # every chunk ends in a \r
    pieces = [text[start:end] for start, end in zip([0, *cuts], [*cuts, len(text)], strict=True)]
    out = b"".join(reader.feed(piece) for piece in pieces) + reader.flush()
    assert out == sse(delta("Hel"), delta("lo"), delta(finish="stop"))
    assert reader.usage == USAGE and reader.finish_reason == "stop" and reader.done


def test_reader_handles_crlf_and_unterminated_tail() -> None:
    reader = ChatStreamReader(strip_usage_chunk=True, started=time.perf_counter())
    text = sse(delta("a")).replace(b"\n", b"\r\n")
    out = reader.feed(text + b"data: " + orjson.dumps(delta("b")))
    out += reader.flush()
    assert b'"a"' in out and b'"b"' in out
    assert reader.output_text == "ab"


COST = {"x_gateway_cost_usd": "0.0019", "x_gateway_saving_basis": "forwarded"}


class Stamp:
    """Gives ``COST`` for the usage it is asked about, and remembers what it was asked."""

    def __init__(self) -> None:
        self.asked: list[dict[str, object]] = []

    def __call__(self, usage: dict[str, object]) -> dict[str, str]:
        self.asked.append(usage)
        return COST


def stamped_reader(
    *, strip_usage_chunk: bool, report_prompt_tokens: int | None = None
) -> tuple[ChatStreamReader, Stamp]:
    reader = ChatStreamReader(
        strip_usage_chunk=strip_usage_chunk,
        started=time.perf_counter(),
        report_prompt_tokens=report_prompt_tokens,
    )
    reader.stamp = stamp = Stamp()
    return reader, stamp


@pytest.mark.parametrize("piece", [1, 7, len(STREAM)])
def test_reader_stamps_the_usage_chunk_and_only_it(piece: int) -> None:
    reader, stamp = stamped_reader(strip_usage_chunk=False)
    out = b"".join(reader.feed(STREAM[i : i + piece]) for i in range(0, len(STREAM), piece)) + reader.flush()
    expected = sse(
        delta("Hel"),
        delta("lo"),
        delta(finish="stop"),
        {"id": "c", "choices": [], "usage": {**USAGE, **COST}},
    )
    assert out == expected
    assert stamp.asked == [USAGE]
    assert reader.usage == USAGE  # the provider's, as read


def test_reader_stamps_a_usage_chunk_left_unterminated() -> None:
    reader, _ = stamped_reader(strip_usage_chunk=False)
    unterminated = STREAM.removesuffix(b"data: [DONE]\n\n").removesuffix(b"\n\n")
    out = reader.feed(unterminated) + reader.flush()
    assert out == sse(delta("Hel"), delta("lo"), delta(finish="stop"), done=False) + b"data: " + orjson.dumps(
        {"id": "c", "choices": [], "usage": {**USAGE, **COST}}
    )


def test_reader_does_not_price_a_usage_chunk_it_drops() -> None:
    reader, stamp = stamped_reader(strip_usage_chunk=True)
    out = reader.feed(ASKED) + reader.flush()
    assert out == sse(delta("Hel"), delta('"usage":null, in the text'), delta(finish="stop"))
    assert stamp.asked == []


def test_reader_stamps_the_usage_reported_as_received() -> None:
    reader, stamp = stamped_reader(strip_usage_chunk=False, report_prompt_tokens=500)
    out = reader.feed(STREAM[:40]) + reader.feed(STREAM[40:]) + reader.flush()
    [usage] = [orjson.loads(line[5:])["usage"] for line in out.splitlines() if b'"usage"' in line]
    assert usage == {**USAGE, "prompt_tokens": 500, "total_tokens": 502, **COST}
    assert stamp.asked == [USAGE]  # priced on what was billed


def streamed(payload: bytes, piece: int = 9) -> httpx.Response:
    async def pieces() -> AsyncIterator[bytes]:
        for start in range(0, len(payload), piece):
            yield payload[start : start + piece]

    return httpx.Response(200, content=pieces(), headers={"content-type": "text/event-stream"})


@pytest.fixture
def router() -> respx.Router:
    return respx.Router(assert_all_called=False)


@pytest.mark.parametrize("client_asked", [False, True])
def test_stream_relay_through_gateway(
    tmp_path: Path, redis_url: str, router: respx.Router, client_asked: bool
) -> None:
    # as the upstream answers when asked for usage: the gateway always asks
    route = router.post(f"{UPSTREAM}/chat/completions").mock(side_effect=lambda request: streamed(ASKED))
    body = chat_body(stream=True)
    if client_asked:
        body["stream_options"] = {"include_usage": True}
    with gateway_client(tmp_path, redis_url, router) as client:
        response = client.post("/v1/chat/completions", json=body)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    sent = orjson.loads(route.calls.last.request.content)
    assert sent["stream_options"] == {"include_usage": True}  # always asked upstream
    assert (b'"usage"' in response.content) is client_asked
    assert response.content.endswith(b"data: [DONE]\n\n")
