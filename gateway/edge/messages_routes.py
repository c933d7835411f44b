"""The HTTP handlers of the Messages front: a few lines each, the work is in the pipeline. Every error on
them is answered in Anthropic's shape (``gateway.fronts.messages.errors``).

Beside ``POST /v1/messages`` and its ``count_tokens``, what Claude Code also calls: ``GET /v1/models`` (and
``/v1/models/{id}``) with ``anthropic-version`` gets Anthropic's list format, and
``POST /api/event_logging/batch`` (the client's telemetry) is answered here, 204, and never forwarded.
"""

from __future__ import annotations

from collections.abc import Mapping

from starlette.requests import Request
from starlette.responses import Response

from gateway.base.echo import echoed
from gateway.base.errors import InvalidRequest, ModelNotFound
from gateway.config.auth import allow_model
from gateway.config.runtime import Route, Runtime
from gateway.edge import routes
from gateway.edge.routes import json_response, state_of
from gateway.fronts.messages import count_tokens as counting_call
from gateway.fronts.messages import pipeline
from gateway.fronts.messages.errors import anthropic_errors

EPOCH = "1970-01-01T00:00:00Z"
"""``created_at`` of every listed model: the config does not say when a model was released."""
DEFAULT_LIMIT, MAX_LIMIT = 20, 1000


@anthropic_errors
async def create(request: Request) -> Response:
    return await pipeline.create(state_of(request).pipeline, request)


@anthropic_errors
async def count_tokens(request: Request) -> Response:
    """``POST /v1/messages/count_tokens``: the provider's count, never below the gateway's own."""
    return await counting_call.count_tokens(state_of(request).pipeline, request)


async def event_logging(request: Request) -> Response:
    """The client's telemetry: nothing to forward, nothing to keep."""
    return Response(status_code=204)


def wants_anthropic(request: Request) -> bool:
    """A request from an Anthropic client (its SDKs and Claude Code send ``anthropic-version``)."""
    return "anthropic-version" in request.headers


async def models(request: Request) -> Response:
    """``GET /v1/models``: Anthropic's list for an Anthropic client, else OpenAI's."""
    ids = routes.stamp_request_ids(request)
    if wants_anthropic(request):
        return with_ids(await list_models(request), {**ids, "request-id": ids["x-gateway-request-id"]})
    return with_ids(await routes.list_models(request), ids)


async def model(request: Request) -> Response:
    """``GET /v1/models/{model}``: Anthropic's model object for an Anthropic client, else OpenAI's."""
    ids = routes.stamp_request_ids(request)
    if wants_anthropic(request):
        return with_ids(await retrieve_model(request), {**ids, "request-id": ids["x-gateway-request-id"]})
    return with_ids(await routes.retrieve_model(request), ids)


def with_ids(response: Response, ids: dict[str, str]) -> Response:
    """``response`` with the request ids every answer carries (an error has them already)."""
    for name, value in ids.items():
        response.headers.setdefault(name, value)
    return response


@anthropic_errors
async def list_models(request: Request) -> Response:
    """The models served on /v1/messages, in Anthropic's paged list (``limit``, ``after_id``,
    ``before_id``)."""
    state = state_of(request)
    runtime = state.store.current
    allowed = state.pipeline.authenticate(runtime, request).models
    served = [name for name in messages_models(runtime) if allowed is None or name in allowed]
    page, more = paged(served, request.query_params)
    return json_response(
        {
            "data": [model_object(name) for name in page],
            "has_more": more,
            "first_id": page[0] if page else None,
            "last_id": page[-1] if page else None,
        }
    )


@anthropic_errors
async def retrieve_model(request: Request) -> Response:
    state = state_of(request)
    runtime = state.store.current
    tenant = state.pipeline.authenticate(runtime, request)
    name = request.path_params["model"]
    if name not in messages_models(runtime):
        raise ModelNotFound(f"model: {echoed(name)}", param="model")
    if tenant.models is not None:
        allow_model(tenant, name)
    return json_response(model_object(name))


def messages_models(runtime: Runtime) -> list[str]:
    """The chat models whose first route is an Anthropic provider, in config order."""
    return [name for name, (route, *_) in runtime.routes.items() if _served(route)]


def _served(route: Route) -> bool:
    return route.provider.kind == "anthropic" and route.model.kind == "chat"


def paged(names: list[str], query: Mapping[str, str]) -> tuple[list[str], bool]:
    """One page of ``names`` and whether there are more beyond it (in the direction paged)."""
    limit = _limit(query.get("limit"))
    after, before = query.get("after_id"), query.get("before_id")
    if before is not None:
        end = names.index(before) if before in names else len(names)
        return names[max(0, end - limit) : end], end - limit > 0
    start = names.index(after) + 1 if after in names else 0
    return names[start : start + limit], start + limit < len(names)


def _limit(value: str | None) -> int:
    """``limit``, a whole number from 1 to 1000 written in ASCII digits (``str.isdigit`` also takes
    ``²`` and other digits ``int`` refuses); anything else is Anthropic's 400."""
    if value is None:
        return DEFAULT_LIMIT
    number = int(value) if value.isascii() and value.isdigit() and len(value) <= 6 else 0
    if not 1 <= number <= MAX_LIMIT:
        raise InvalidRequest(
            f"limit: Input should be a whole number from 1 to {MAX_LIMIT}, not {echoed(value, 32)!r}.",
            param="limit",
        )
    return number


def model_object(name: str) -> dict[str, object]:
    return {"type": "model", "id": name, "display_name": name, "created_at": EPOCH}
