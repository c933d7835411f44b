"""Errors on the Messages routes, in Anthropic's shape, so that the anthropic SDKs raise their own types.

``{"type": "error", "error": {"type": ..., "message": ...}, "request_id": ...}``, the error's ``type`` from
its status (``ERROR_TYPES``, Anthropic's table). The gateway's own errors (a bad key, a budget, a policy's
rejection) are rendered this way, their code kept in the message; an upstream's answer (an Anthropic
provider's 400, 429, 529 ``overloaded_error``) is passed through with its status and body unchanged.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import orjson
import structlog
from starlette.requests import Request
from starlette.responses import Response

from gateway.base.echo import echoed
from gateway.base.errors import GatewayError, UpstreamExhausted, UpstreamRejected
from gateway.base.headroom import Headroom

ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}
"""Anthropic's error types by HTTP status; any other status is an ``invalid_request_error`` below 500 and
an ``api_error`` from 500 on."""

Handler = Callable[[Request], Awaitable[Response]]

log = structlog.get_logger("gateway.messages")


def error_type(status: int) -> str:
    found = ERROR_TYPES.get(status)
    if found is not None:
        return found
    return "api_error" if status >= 500 else "invalid_request_error"


def error_body(status: int, message: str, request_id: str | None) -> bytes:
    return orjson.dumps(
        {
            "type": "error",
            "error": {"type": error_type(status), "message": message},
            "request_id": request_id,
        }
    )


def passed_through(exc: GatewayError) -> UpstreamRejected | None:
    """The upstream answer an error carries, to be passed on as it is (Anthropic's own error body)."""
    if isinstance(exc, UpstreamRejected):
        return exc
    if isinstance(exc, UpstreamExhausted):
        return exc.last
    return None


def render(request: Request, exc: GatewayError) -> Response:
    """``exc`` as the answer to a Messages request: the upstream's answer as it came, else the gateway's
    error in Anthropic's shape."""
    request_id: str | None = getattr(request.state, "request_id", None)
    headers = dict(exc.headers())
    if request_id:
        headers["x-gateway-request-id"] = request_id
        headers["x-request-id"] = getattr(request.state, "client_request_id", None) or request_id
        headers["request-id"] = request_id
    headroom: Headroom | None = getattr(request.state, "headroom", None)
    if headroom is not None:  # the caller's rate limits (``gateway.core.rate_limits``)
        headers.update(headroom.anthropic_headers())
    upstream = passed_through(exc)
    if upstream is not None:
        return Response(
            upstream.raw_body,
            status_code=upstream.status_code,
            media_type=upstream.content_type,
            headers=headers,
        )
    return Response(
        error_body(exc.status_code, message_of(exc), request_id),
        status_code=exc.status_code,
        media_type="application/json",
        headers=headers,
    )


def message_of(exc: GatewayError) -> str:
    """The gateway's message, led by its code; over the context window, in the words Anthropic uses (a
    client such as Claude Code compacts its conversation on them)."""
    if exc.code == "context_length_exceeded":
        return f"prompt is too long: {exc.message}"
    return f"{exc.code}: {exc.message}" if exc.code else exc.message


def anthropic_errors(handler: Handler) -> Handler:
    """``handler`` with every error it raises answered in Anthropic's shape; a bug is logged and answered
    as Anthropic's ``api_error`` (500)."""

    async def handle(request: Request) -> Response:
        try:
            return await handler(request)
        except GatewayError as exc:
            return render(request, exc)
        except Exception:
            log.exception("messages_unexpected_error", path=echoed(request.url.path))
            return render(request, GatewayError("The gateway failed unexpectedly; see its logs."))

    return handle
