"""The hot routes, served straight from the server: a ``POST`` to a model API (chat, Responses, Messages,
embeddings) at its exact path skips FastAPI's and Starlette's layers (their error middlewares, the body-limit
and exit-stack middlewares, the telemetry check, the router's matching of every route in turn), which added
about a tenth of a request's CPU time and gave these routes nothing: they take no dependencies, and their
errors are rendered here by the app's own exception handlers, as the layers would.

Anything else (another method or path, a path ``gateway.edge.paths`` would normalise or refuse, a root path
set) goes the whole way through the app, as before.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

from gateway.edge.paths import is_plain

Endpoint = Callable[[Request], Awaitable[Response]]
ErrorHandler = Callable[[Request, Exception], Awaitable[Response]]


class HotRoutes:
    """``POST`` endpoints by exact path, and the app's exception handlers (by exception class)."""

    def __init__(self, endpoints: Mapping[str, Endpoint], handlers: Mapping[Any, Any]) -> None:
        self.endpoints = dict(endpoints)
        self.handlers = handlers

    def endpoint(self, scope: Scope) -> Endpoint | None:
        """The endpoint serving this request directly; None when it takes the whole way."""
        if scope["method"] != "POST" or scope.get("root_path"):
            return None
        endpoint = self.endpoints.get(scope["path"])
        if endpoint is None or not is_plain(scope.get("raw_path"), scope["path"]):
            return None
        return endpoint

    async def serve(self, endpoint: Endpoint, scope: Scope, receive: Receive, send: Send) -> None:
        """Call the endpoint and send its response; an exception raised before the response started is
        answered by the app's handler for it (and, when only the catch-all ``Exception`` handler takes it,
        raised again for the server to log, as Starlette's error middleware does)."""
        started = False

        async def sending(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        request = Request(scope, receive, sending)
        try:
            response = await endpoint(request)
            await response(scope, receive, sending)
        except Exception as exc:
            if started:
                raise
            handled, handler = self._handler(exc)
            await (await handler(request, exc))(scope, receive, sending)
            if not handled:
                raise

    def _handler(self, exc: Exception) -> tuple[bool, ErrorHandler]:
        """(whether a handler of its own kind took it, the handler)."""
        for kind in type(exc).__mro__:
            handler = self.handlers.get(kind)
            if handler is not None:
                return kind is not Exception, handler
        return False, self.handlers[Exception]
