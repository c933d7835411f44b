"""A recording relay between a real client and the gateway, for the agent smoke runs.

Clients show a failed turn in their own words (Codex CLI prints "ran out of room" for any
``context_length_exceeded``), and the gateway's log names the error code but not its message. The relay
passes every request and response through unchanged (streams as they come) and writes one JSON line per
exchange to ``--log``: time, method, path, status, the ``x-gateway-*`` response headers (the action, the
tokens, the warnings) and, for a 4xx/5xx, the response body the client got.

    python scripts/smoke_relay.py --port 8081 --upstream http://127.0.0.1:8080 --log relay.ndjson
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route

HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "host"}


def create_relay(upstream: str, log_path: str) -> Starlette:
    client = httpx.AsyncClient(base_url=upstream, timeout=httpx.Timeout(600.0))
    log = open(log_path, "a", buffering=1)  # open for the relay's lifetime

    async def relay(request: Request) -> StreamingResponse:
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_BY_HOP}
        headers["accept-encoding"] = "identity"  # error bodies readable in the log
        sent = client.build_request(
            request.method,
            request.url.path,
            params=request.url.query,
            headers=headers,
            content=await request.body(),
        )
        response = await client.send(sent, stream=True)
        record: dict[str, Any] = {
            "time": time.time(),
            "method": request.method,
            "path": request.url.path,
            "status": response.status_code,
            "gateway": {k: v for k, v in response.headers.items() if k.lower().startswith("x-gateway-")},
        }

        async def body() -> AsyncIterator[bytes]:
            kept = bytearray()
            async for chunk in response.aiter_raw():
                if response.status_code >= 400 and len(kept) < 20_000:
                    kept.extend(chunk)
                yield chunk
            if response.status_code >= 400:
                record["body"] = kept.decode(errors="replace")

        async def close() -> None:
            await response.aclose()
            log.write(json.dumps(record) + "\n")

        out = {k: v for k, v in response.headers.items() if k.lower() not in HOP_BY_HOP}
        return StreamingResponse(
            body(), status_code=response.status_code, headers=out, background=BackgroundTask(close)
        )

    methods = ["GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"]
    return Starlette(routes=[Route("/{path:path}", relay, methods=methods)])


def main() -> None:
    parser = argparse.ArgumentParser(description="A recording relay in front of the gateway")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--upstream", required=True)
    parser.add_argument("--log", required=True)
    args = parser.parse_args()
    uvicorn.run(create_relay(args.upstream, args.log), host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
