"""A minimal, fast OpenAI-compatible upstream for throughput benchmarks: a bare ASGI app on uvicorn with
httptools, answering every chat completion with a fixed body or a fixed 8-chunk stream. Run:
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
    if b'"stream":true' not in body.replace(b" ", b""):
        await _send(send, 200, COMPLETION, b"application/json")
        return
    await send(
        {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]}
    )
    for piece in STREAM:
        await send({"type": "http.response.body", "body": piece, "more_body": True})
    await send({"type": "http.response.body", "body": b"".join(STREAM_END), "more_body": False})


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
