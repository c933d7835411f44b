"""The other Responses calls, passed to the provider that can answer them.

By id (``GET`` / ``DELETE /v1/responses/{id}``, ``POST /v1/responses/{id}/cancel``,
``GET /v1/responses/{id}/input_items``): the provider that served the response, when the gateway saw it
created, else the config's first provider. By the body's model (``POST /v1/responses/compact``,
``POST /v1/responses/input_tokens``): that model's provider, under its upstream name. Query strings go
along. Only ``compact`` runs a model, so only its usage is metered; reading a response back must not be
billed twice (a background response is billed once, as the request that created it, when a read shows it
ended: ``gateway.responses.pending``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import orjson
from starlette.requests import Request
from starlette.responses import Response

from gateway import body as bodies
from gateway import replies
from gateway.body import headers_of
from gateway.errors import GatewayError, RouteNotFound
from gateway.record import RequestRecord, notify, notify_soon
from gateway.responses import reply as responses_reply
from gateway.responses.memory import Remembered
from gateway.runtime import Route, Runtime
from gateway.upstream import Exchange, send
from gateway.usage import usage_from_openai

if TYPE_CHECKING:
    from gateway.pipeline import Pipeline

METERED = frozenset({"compact"})


async def by_id(pipeline: Pipeline, request: Request, response_id: str, action: str = "") -> Response:
    """A call about one response. ``GET ...?stream=true`` is relayed as it arrives. A background
    response seen ended here has its cost recorded (``gateway.responses.pending``); one about to be
    deleted is looked at first, while the provider can still tell."""
    record = pipeline.begin(request, "responses_lookup")
    try:
        runtime = pipeline.store.current
        record.tenant = tenant = pipeline.authenticate(runtime, request)
        raw = await bodies.read_body(request, runtime.config.limits.max_body_bytes)
        remembered = await pipeline.memory.recall(tenant.name, response_id)
        route = route_for_id(runtime, remembered)
        if request.method == "DELETE" and remembered is not None and remembered.pending is not None:
            await pipeline.settler.look(tenant.name, response_id)
        record.stream = streamed = request.method == "GET" and not action and _asks_stream(request)
        exchange = await send(
            pipeline.pool,
            (route,),
            path=with_query(f"/responses/{response_id}{'/' + action if action else ''}", request),
            body_for=lambda route: raw,
            incoming_headers=headers_of(request),
            stream=streamed,
            method=request.method,
        )
    except GatewayError as exc:
        pipeline.fail(record, exc)
        raise

    async def seen(seen_id: str, response: Mapping[str, Any] | None) -> None:
        if action in ("", "cancel"):
            await pipeline.settler.observe(tenant.name, seen_id, remembered, response)

    if streamed:
        record.provider = exchange.route.provider_name
        record.retries = exchange.attempts - 1
        record.status = exchange.response.status_code
        return responses_reply.relay(
            record, exchange, remember=seen, done=lambda: notify(pipeline.observers, record)
        )
    if remembered is not None and remembered.pending is not None and exchange.response.status_code < 300:
        await seen(response_id, responses_reply.json_object(exchange.response.content))
    return _answer(pipeline, record, exchange, metered=False)


async def by_model(pipeline: Pipeline, request: Request, operation: str) -> Response:
    record = pipeline.begin(request, f"responses_{operation}")
    try:
        runtime = pipeline.store.current
        record.tenant = pipeline.authenticate(runtime, request)
        raw = await bodies.read_body(request, runtime.config.limits.max_body_bytes)
        body = bodies.parse_object(raw)
        record.requested_model = model = bodies.require_model(body)
        exchange = await send(
            pipeline.pool,
            runtime.candidates(model),
            path=with_query(f"/responses/{operation}", request),
            body_for=lambda route: (
                raw
                if route.upstream_model == model
                else orjson.dumps({**body, "model": route.upstream_model})
            ),
            incoming_headers=headers_of(request),
            stream=False,
        )
    except GatewayError as exc:
        pipeline.fail(record, exc)
        raise
    return _answer(pipeline, record, exchange, metered=operation in METERED)


def route_for_id(runtime: Runtime, remembered: Remembered | None) -> Route:
    """The model that made the response, else one of its provider's, else the first provider's."""
    if remembered is not None:
        known = runtime.routes.get(remembered.model)
        if known is not None and known[0].provider_name == remembered.provider:
            return known[0]
    providers = list(runtime.config.providers)
    wanted = remembered.provider if remembered is not None and remembered.provider in providers else None
    for provider in (wanted, *providers):
        for routes in runtime.routes.values():
            if routes[0].provider_name == provider:
                return routes[0]
    raise RouteNotFound("No provider is configured to answer calls about responses.")


def with_query(path: str, request: Request) -> str:
    query = request.url.query
    return f"{path}?{query}" if query else path


def _asks_stream(request: Request) -> bool:
    return request.query_params.get("stream", "").lower() == "true"


def _answer(pipeline: Pipeline, record: RequestRecord, exchange: Exchange, *, metered: bool) -> Response:
    upstream = exchange.response
    record.provider = exchange.route.provider_name
    record.retries = exchange.attempts - 1
    record.status = upstream.status_code
    if metered:
        record.called_model = exchange.route.public_model
        data = responses_reply.json_object(upstream.content)
        record.usage = usage_from_openai(data.get("usage") if data is not None else None)
    response = Response(
        content=upstream.content,
        status_code=upstream.status_code,
        media_type=upstream.headers.get("content-type", "application/json"),
        headers=replies.headers(record, upstream),
    )
    notify_soon(pipeline.observers, record)
    return response
