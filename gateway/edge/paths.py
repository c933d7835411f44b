"""The request path, checked and normalised once at the edge, before any route sees it.

The server decodes percent-escapes into ``scope["path"]`` and keeps the bytes as sent in ``raw_path``.
A path that hides its meaning from the router is refused (400 ``invalid_path``): a dot segment (``.`` or
``..``, also when spelled ``%2e``), an encoded separator or delimiter (``%2f``, ``%5c``, ``%3f``, ``%23``,
and ``%25``, which would let a second decoding upstream find any of these), a backslash, or a control
character. Otherwise runs of slashes become one and a trailing slash goes, so that the route matched is
exactly the path the gateway will act on: an upstream client that normalises dots itself can no longer
turn ``/v1/x/../chat/completions`` into a chat call that skipped every control.
"""

from __future__ import annotations

import re
from typing import Any

from gateway.base.errors import InvalidRequest

Scope = dict[str, Any]
ASGIApp = Any

_SUSPECT = re.compile(rb"%|/\.|//|\\|[\x00-\x1f\x7f]|/$")
_ENCODED_SEPARATOR = re.compile(rb"%(2f|5c|3f|23|25)", re.IGNORECASE)
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_SLASHES = re.compile(r"/{2,}")


def is_plain(raw_path: bytes | None, path: str) -> bool:
    """Whether the path needs no check (``checked_path`` would return it as it is)."""
    return not _SUSPECT.search(raw_path if raw_path is not None else path.encode("utf-8", "surrogateescape"))


def checked_path(raw_path: bytes, path: str) -> str:
    """The normalised ``path``; raises ``InvalidRequest`` for a path the gateway will not route."""
    if not _SUSPECT.search(raw_path):
        return path
    if _ENCODED_SEPARATOR.search(raw_path) or b"\\" in raw_path or "\\" in path:
        raise _invalid("encoded '/', '\\', '?', '#' or '%' and backslashes are not allowed in a path")
    if _CONTROL.search(path):
        raise _invalid("control characters are not allowed in a path")
    segments = path.split("/")
    if any(segment in (".", "..") for segment in segments):
        raise _invalid("dot segments ('.' and '..') are not allowed in a path")
    normalised = _SLASHES.sub("/", path)
    return normalised.rstrip("/") or "/"


def _invalid(reason: str) -> InvalidRequest:
    return InvalidRequest(f"Invalid request path: {reason}.", param="path", code="invalid_path")


class PathGuard:
    """ASGI middleware: every HTTP and WebSocket request passes ``checked_path`` before routing."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] in ("http", "websocket"):
            raw = scope.get("raw_path") or scope["path"].encode("utf-8", "surrogateescape")
            try:
                path = checked_path(raw, scope["path"])
            except InvalidRequest as exc:
                await _refuse(scope, send, exc)
                return
            if path != scope["path"]:
                scope = {**scope, "path": path, "raw_path": path.encode("utf-8", "surrogateescape")}
        await self.app(scope, receive, send)


async def _refuse(scope: Scope, send: Any, error: InvalidRequest) -> None:
    if scope["type"] == "websocket":
        await send({"type": "websocket.close", "code": 1008})
        return
    body = error.body()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": error.status_code, "headers": headers})
    await send({"type": "http.response.body", "body": body})
