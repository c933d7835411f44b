"""The HTTP edge: small handlers that call the pipeline, and the error rendering."""

from __future__ import annotations

import hmac
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING

import orjson
import redis.asyncio as aioredis
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import Request
from starlette.responses import Response

from gateway.base.echo import echoed
from gateway.base.errors import AuthenticationFailed, GatewayError, NotFound, PermissionDenied, RouteNotFound
from gateway.base.headroom import Headroom
from gateway.base.types import Tenant
from gateway.config.auth import allow_model
from gateway.core.request_ids import client_request_id, new_request_id
from gateway.dashboard import session
from gateway.fronts import chat, forwarded

if TYPE_CHECKING:
    from gateway.edge.state import GatewayState


def state_of(request: Request) -> GatewayState:
    state: GatewayState = request.app.state.gateway
    return state


def json_response(data: object, status_code: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(
        orjson.dumps(data), status_code=status_code, media_type="application/json", headers=headers
    )


async def chat_completions(request: Request) -> Response:
    return await chat.completions(state_of(request).pipeline, request)


async def embeddings(request: Request) -> Response:
    return await forwarded.embeddings(state_of(request).pipeline, request)


async def passthrough(request: Request) -> Response:
    return await forwarded.passthrough(state_of(request).pipeline, request, request.path_params["path"])


async def list_models(request: Request) -> Response:
    state = state_of(request)
    runtime = state.store.current
    allowed = state.pipeline.authenticate(runtime, request).models
    data = [
        _model_object(name, route.provider_name)
        for name, (route, *_) in runtime.routes.items()
        if allowed is None or name in allowed
    ]
    return json_response({"object": "list", "data": data})


async def retrieve_model(request: Request) -> Response:
    state = state_of(request)
    runtime = state.store.current
    tenant = state.pipeline.authenticate(runtime, request)
    name = request.path_params["model"]
    route = runtime.candidates(name)[0]
    if tenant.models is not None:
        allow_model(tenant, name)
    return json_response(_model_object(name, route.provider_name))


def _model_object(name: str, provider: str) -> dict[str, object]:
    return {"id": name, "object": "model", "created": 0, "owned_by": provider}


def tenant_names(request: Request) -> Iterable[str]:
    return state_of(request).store.current.config.tenants.keys()


def redis_of(request: Request) -> aioredis.Redis:
    return state_of(request).redis


def calling_tenant(request: Request) -> Tenant:
    """The tenant whose key the request carries (401 otherwise)."""
    state = state_of(request)
    return state.pipeline.authenticate(state.store.current, request)


async def healthz(request: Request) -> Response:
    return json_response({"status": "ok"})


async def root(request: Request) -> Response:
    """``GET``/``HEAD /``: what a load balancer's default check and a curious person try first."""
    return json_response({"status": "ok", "health": "/healthz", "ready": "/readyz"})


def stamp_request_ids(request: Request) -> dict[str, str]:
    """The ids every answer carries (``x-gateway-request-id``, ``x-request-id``), for a request the pipeline
    does not record (a model list); set on the request's state, so that its errors carry them too."""
    request.state.request_id = request_id = new_request_id()
    request.state.client_request_id = incoming = client_request_id(request.headers)
    return {"x-gateway-request-id": request_id, "x-request-id": incoming or request_id}


async def readyz(request: Request) -> Response:
    """Ready while the config is loaded and cost events can be written (``gateway.edge.readiness``)."""
    verdict = await state_of(request).readiness.verdict()
    body = {"status": "ready" if verdict.ready else "not ready", "checks": verdict.checks}
    return json_response(body, 200 if verdict.ready else 503)


async def require_admin(request: Request) -> None:
    """Admin routes need GATEWAY_ADMIN_KEY; when it is unset they are disabled. A read (GET) also passes
    with the dashboard's session cookie (``gateway.dashboard.session``), so its links open the reports."""
    admin_key = state_of(request).settings.admin_key
    if not admin_key:
        raise PermissionDenied(
            "Admin routes are disabled: set GATEWAY_ADMIN_KEY to enable them.", code="admin_disabled"
        )
    if request.method in ("GET", "HEAD") and session.valid(
        admin_key, request.cookies.get(session.COOKIE), now=time.time()
    ):
        return
    presented = request.headers.get("authorization", "").removeprefix("Bearer ").strip()
    presented = presented or request.headers.get("x-admin-key", "")
    if not hmac.compare_digest(presented.encode(), admin_key.encode()):
        raise AuthenticationFailed("Incorrect or missing admin key.")


# --- errors ---------------------------------------------------------------------------------------


async def render_gateway_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, GatewayError)
    headers = dict(exc.headers())
    request_id = getattr(request.state, "request_id", None)
    if request_id:
        headers["x-gateway-request-id"] = request_id
        headers["x-request-id"] = getattr(request.state, "client_request_id", None) or request_id
    headroom: Headroom | None = getattr(request.state, "headroom", None)
    if headroom is not None:  # the caller's rate limits (``gateway.core.rate_limits``)
        headers.update(headroom.openai_headers())
    media_type = getattr(exc, "content_type", "application/json")
    return Response(exc.body(), status_code=exc.status_code, media_type=media_type, headers=headers)


async def render_http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)
    error: GatewayError
    if exc.status_code == 404:
        error = RouteNotFound(f"Unknown request URL: {request.method} {echoed(request.url.path)}.")
    elif exc.status_code == 405:
        error = NotFound(
            f"Method {request.method} is not allowed on {echoed(request.url.path)}.",
            code="method_not_allowed",
        )
        error.status_code = 405
    else:
        error = GatewayError(str(exc.detail))
        error.status_code = exc.status_code
    return await render_gateway_error(request, error)


async def render_unexpected(request: Request, exc: Exception) -> Response:
    return await render_gateway_error(request, GatewayError("The gateway failed unexpectedly; see its logs."))
