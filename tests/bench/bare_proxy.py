"""The floor the proxy benchmark compares the gateway with: a bare Starlette proxy that relays the body to
the upstream and the answer back, streams as they arrive, with the gateway's own HTTP stack (uvicorn with
uvloop and httptools, httpx with the aiohttp transport) and nothing else.

Run: ``python -m tests.bench.bare_proxy --port 9001 --upstream http://127.0.0.1:9000``
(``tests.bench.bench_proxy --target bare`` starts it).
"""

from __future__ import annotations

import argparse
from collections.abc import AsyncIterator

import httpx
import uvicorn
from httpx_aiohttp import AiohttpTransport
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

PASSED = ("authorization", "content-type", "x-api-key", "anthropic-version")


def create_app(upstream: str) -> Starlette:
    client = httpx.AsyncClient(base_url=upstream, transport=AiohttpTransport(), timeout=60)

    async def relay(request: Request) -> Response:
        headers = {name: value for name, value in request.headers.items() if name in PASSED}
        sent = client.build_request("POST", request.url.path, content=await request.body(), headers=headers)
        answer = await client.send(sent, stream=True)
        kind = answer.headers.get("content-type", "application/json")
        if kind.startswith("text/event-stream"):

            async def chunks() -> AsyncIterator[bytes]:
                try:
                    async for chunk in answer.aiter_raw():
                        yield chunk
                finally:
                    await answer.aclose()

            return StreamingResponse(chunks(), status_code=answer.status_code, media_type=kind)
        content = await answer.aread()
        await answer.aclose()
        return Response(content, status_code=answer.status_code, media_type=kind)

    async def healthz(request: Request) -> Response:
        return Response(b"ok")

    return Starlette(
        routes=[Route("/healthz", healthz), Route("/v1/{path:path}", relay, methods=["POST"])],
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--upstream", required=True)
    args = parser.parse_args()
    uvicorn.run(
        create_app(args.upstream),
        host="127.0.0.1",
        port=args.port,
        loop="uvloop",
        http="httptools",
        access_log=False,
        log_level="warning",
    )


if __name__ == "__main__":
    main()
