"""The HTTP handlers of the Responses front: a few lines each, the work is in the pipeline."""

from __future__ import annotations

import orjson
from starlette.requests import Request
from starlette.responses import Response
from starlette.websockets import WebSocket

from gateway.edge.routes import state_of
from gateway.fronts.responses import calls
from gateway.fronts.responses.create import create as create_response

WEBSOCKET_REFUSAL = (
    "WebSocket is not supported on /v1/responses by this gateway: send POST /v1/responses over HTTP "
    "(with stream: true for server-sent events)."
)


async def create(request: Request) -> Response:
    state = state_of(request)
    return await create_response(state.pipeline, state.responses, request)


async def by_id(request: Request) -> Response:
    params, state = request.path_params, state_of(request)
    return await calls.by_id(
        state.pipeline, state.responses, request, params["response_id"], params.get("action", "")
    )


async def compact(request: Request) -> Response:
    state = state_of(request)
    return await calls.by_model(state.pipeline, state.responses, request, "compact")


async def input_tokens(request: Request) -> Response:
    state = state_of(request)
    return await calls.by_model(state.pipeline, state.responses, request, "input_tokens")


async def refuse_websocket(websocket: WebSocket) -> None:
    """Refused at the handshake, with a plain HTTP error, so that clients fall back to HTTP at once."""
    body = orjson.dumps(
        {
            "error": {
                "message": WEBSOCKET_REFUSAL,
                "type": "invalid_request_error",
                "param": None,
                "code": "websocket_not_supported",
            }
        }
    )
    if "websocket.http.response" in websocket.scope.get("extensions", {}):
        await websocket.send_denial_response(Response(body, status_code=426, media_type="application/json"))
    else:
        await websocket.close(code=1008)  # the server answers the handshake with 403
