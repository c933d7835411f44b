"""A minimal, fast OpenAI-compatible upstream for throughput benchmarks: a bare ASGI app on uvicorn with
httptools, answering every chat completion (and every ``POST /v1/responses`` and Anthropic
``POST /v1/messages``) with a fixed body or a fixed 8-chunk (8-event, 10 for Messages) stream. Run:
``python -m tests.bench.fast_upstream --port 9000``."""

from __future__ import annotations

import argparse
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
import uvicorn

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

COMPLETION = orjson.dumps(
    {
        "id": "chatcmpl-bench",
        "object": "chat.completion",
        "created": 1,
        "model": "gpt-5.4",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "ok " * 20}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 250, "completion_tokens": 40, "total_tokens": 290},
    }
)


def _chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    data = {
        "id": "c",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "gpt-5.4",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return b"data: " + orjson.dumps(data) + b"\n\n"


STREAM = [_chunk({"role": "assistant", "content": ""})] + [_chunk({"content": "ok " * 5}) for _ in range(6)]
STREAM_END = [
    _chunk({}, "stop"),
    b"data: "
    + orjson.dumps({"id": "c", "choices": [], "usage": {"prompt_tokens": 250, "completion_tokens": 30}})
    + b"\n\n",
    b"data: [DONE]\n\n",
]


RESPONSE = {
    "id": "resp_bench",
    "object": "response",
    "created_at": 1,
    "status": "completed",
    "model": "gpt-5.4",
    "output": [
        {
            "id": "msg_bench",
            "type": "message",
            "status": "completed",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "ok " * 20, "annotations": []}],
        }
    ],
    "usage": {"input_tokens": 250, "output_tokens": 40, "total_tokens": 290},
}
RESPONSE_BODY = orjson.dumps(RESPONSE)


def _event(data: dict[str, Any]) -> bytes:
    return b"event: " + data["type"].encode() + b"\ndata: " + orjson.dumps(data) + b"\n\n"


RESPONSE_STREAM = [
    _event({"type": "response.created", "response": {**RESPONSE, "status": "in_progress", "output": []}}),
    *(
        _event({"type": "response.output_text.delta", "item_id": "msg_bench", "delta": "ok " * 5})
        for _ in range(6)
    ),
]
RESPONSE_STREAM_END = [_event({"type": "response.completed", "response": RESPONSE})]

MESSAGE = {
    "id": "msg_bench",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-5",
    "content": [{"type": "text", "text": "ok " * 20}],
    "stop_reason": "end_turn",
    "stop_sequence": None,
    "usage": {
        "input_tokens": 250,
        "cache_read_input_tokens": 0,
        "cache_creation_input_tokens": 0,
        "output_tokens": 40,
    },
}
MESSAGE_BODY = orjson.dumps(MESSAGE)
MESSAGE_STREAM = [
    _event({"type": "message_start", "message": {**MESSAGE, "content": [], "stop_reason": None}}),
    _event({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
    *(
        _event(
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "ok " * 5}}
        )
        for _ in range(6)
    ),
]
MESSAGE_STREAM_END = [
    _event({"type": "content_block_stop", "index": 0}),
    _event({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": MESSAGE["usage"]}),
    _event({"type": "message_stop"}),
]
ANSWERS = {
    "/v1/responses": (RESPONSE_BODY, RESPONSE_STREAM, RESPONSE_STREAM_END),
    "/v1/messages": (MESSAGE_BODY, MESSAGE_STREAM, MESSAGE_STREAM_END),
}


async def app(scope: Scope, receive: Receive, send: Send) -> None:
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    if scope["path"].endswith("/models"):
        await _send(send, 200, b'{"object":"list","data":[]}', b"application/json")
        return
    whole, stream, end = ANSWERS.get(scope["path"], (COMPLETION, STREAM, STREAM_END))
    if b'"stream":true' not in body.replace(b" ", b""):
        await _send(send, 200, whole, b"application/json")
        return
    await send(
        {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]}
    )
    for piece in stream:
        await send({"type": "http.response.body", "body": piece, "more_body": True})
    await send({"type": "http.response.body", "body": b"".join(end), "more_body": False})


async def _send(send: Send, status: int, body: bytes, content_type: bytes) -> None:
    await send(
        {"type": "http.response.start", "status": status, "headers": [(b"content-type", content_type)]}
    )
    await send({"type": "http.response.body", "body": body})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=9000)
    args = parser.parse_args()
    uvicorn.run(
        app,
        host="127.0.0.1",
        port=args.port,
        loop="uvloop",
        http="httptools",
        access_log=False,
        log_level="warning",
    )


if __name__ == "__main__":
    main()
