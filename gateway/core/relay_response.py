"""The response a relayed stream goes out in: Starlette's ``StreamingResponse`` with a cheaper watch for a
client that goes away.

Under ASGI spec 2.3 (uvicorn's) ``StreamingResponse`` runs the stream and a listener for
``http.disconnect`` in an anyio task group: two tasks, cancel scopes, and a cancel that formats its task's
repr, on every stream. Here the stream runs in the request's own task, in a cancel scope, and one plain
asyncio task waits for the disconnect; when the client goes away it cancels that scope (the stream's
iterator's ``finally`` closes the upstream call in a shielded scope, as before) and the response returns
normally, as Starlette's does. A stream that ends first cancels the watcher, and nothing else. Under
spec 2.4 (a server whose ``send`` raises ``OSError`` once the client is gone) Starlette's own path runs.
"""

from __future__ import annotations

import asyncio

import anyio
from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send


class RelayResponse(StreamingResponse):
    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or _spec_version(scope) >= (2, 4):
            await super().__call__(scope, receive, send)
            return
        sent = False
        with anyio.CancelScope() as stream:

            async def watch() -> None:
                while (await receive())["type"] != "http.disconnect":
                    pass
                if not sent:
                    stream.cancel()  # delivered as anyio delivers it: a shielded close still finishes

            watcher = asyncio.get_running_loop().create_task(watch())
            try:
                await self.stream_response(send)
            finally:
                sent = True
                watcher.cancel()
        if self.background is not None:
            await self.background()


def _spec_version(scope: Scope) -> tuple[int, ...]:
    return tuple(map(int, scope.get("asgi", {}).get("spec_version", "2.0").split(".")))
