"""The other Responses calls, passed to the provider that can answer them.

By id (``GET`` / ``DELETE /v1/responses/{id}``, ``POST /v1/responses/{id}/cancel``,
``GET /v1/responses/{id}/input_items``): the provider that served the response, when the gateway saw it
created, else the config's first provider. By the body's model (``POST /v1/responses/compact``,
``POST /v1/responses/input_tokens``): that model's provider, under its upstream name. Query strings go
along. Only ``compact`` runs a model, so only its usage is metered; reading a response back must not be
billed twice (a background response is billed once, as the request that created it, when a read shows it
ended: ``gateway.fronts.responses.pending``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import Response

from gateway.base.record import RequestRecord, notify_soon
from gateway.config.auth import allow_model
from gateway.core import body as bodies
from gateway.core import replies
from gateway.core.admission import Hold
from gateway.core.body import headers_of
from gateway.core.metering import max_cost_nanos
from gateway.core.planning import with_model
from gateway.core.tags import request_tags
from gateway.fronts.responses import reply as responses_reply
from gateway.fronts.responses.counting import responses_upper_bound
from gateway.fronts.responses.ownership import check_references, owned
from gateway.fronts.responses.where import route_for_id
from gateway.money.usage import usage_from_openai
from gateway.proxy.count_calls import admitted_body, check_budget_left
from gateway.upstream.calls import Exchange, send

if TYPE_CHECKING:
    from gateway.fronts.responses.stored import StoredResponses
    from gateway.proxy.pipeline import Pipeline

METERED = frozenset({"compact"})


async def by_id(
    pipeline: Pipeline, responses: StoredResponses, request: Request, response_id: str, action: str = ""
) -> Response:
    """A call about one response. ``GET ...?stream=true`` is relayed as it arrives. A background
    response seen ended here has its cost recorded (``gateway.fronts.responses.pending``); one about to be
    deleted is looked at first, while the provider can still tell."""
    record = pipeline.begin(request, "responses_lookup")
    async with pipeline.failing(record):
        runtime = pipeline.store.current
        record.tenant = tenant = pipeline.authenticate(runtime, request)
        raw = await bodies.read_body(request, runtime.config.limits.max_body_bytes)
        remembered = await owned(responses.memory, runtime, tenant.name, response_id)
        route = route_for_id(runtime, remembered)
        if request.method == "DELETE" and remembered is not None and remembered.pending is not None:
            await responses.settler.look(tenant.name, response_id, remembered=remembered)
        record.stream = streamed = request.method == "GET" and not action and _asks_stream(request)
        exchange = await send(
            pipeline.pool,
            (route,),
            path=with_query(f"/responses/{response_id}{'/' + action if action else ''}", request),
            body_for=lambda route: raw,
            incoming_headers=headers_of(request),
            stream=streamed,
            method=request.method,
            expect_json=not streamed,
            attempt_log=record.attempt_log,
        )

    settles = action in ("", "cancel") and remembered is not None and remembered.pending is not None

    async def seen(seen_id: str, response: Mapping[str, Any] | None) -> None:
        if settles:
            await responses.settler.observe(tenant.name, seen_id, remembered, response)

    pipeline.note_exchange(record, exchange, metered=False)
    if streamed:
        return responses_reply.relay(
            record, exchange, remember=seen, done=lambda: notify_soon(pipeline.observers, record)
        )
    if settles and exchange.response.status_code < 300:
        await seen(response_id, exchange.data)
    return _answer(pipeline, record, exchange)


async def by_model(
    pipeline: Pipeline, responses: StoredResponses, request: Request, operation: str
) -> Response:
    """``compact`` runs a model: it takes a budget hold (the most its input and output can cost) and is
    billed; ``input_tokens`` only counts, within its tenant's limit (``gateway.proxy.count_calls``)."""
    record = pipeline.begin(request, f"responses_{operation}")
    metered = operation in METERED
    hold = Hold(pipeline.budgets)
    async with pipeline.failing(record, hold):
        runtime = pipeline.store.current
        record.tenant = pipeline.authenticate(runtime, request)
        if metered:
            record.tags = request_tags(headers_of(request), record.tenant)
            raw = await bodies.read_body(request, runtime.config.limits.max_body_bytes)
        else:
            raw = await admitted_body(pipeline.count_limiter, runtime, record, request)
        body = bodies.parse_object(raw)
        record.requested_model = model = bodies.require_model(body)
        if record.tenant.models is not None:  # a managed key's allow-list
            allow_model(record.tenant, model)
        candidates = runtime.serving(model, "chat")
        await check_references(responses.memory, runtime, record.tenant.name, body)
        if not metered:
            await check_budget_left(hold, runtime, record, headers_of(request))
        if metered:
            await hold.take(
                runtime,
                record,
                headers_of(request),
                lambda: max_cost_nanos(
                    runtime.config.models.get(model),
                    responses_upper_bound(runtime.counter, model, body, len(raw)),
                    {},
                ),
            )
        exchange = await send(
            pipeline.pool,
            candidates,
            path=with_query(f"/responses/{operation}", request),
            body_for=lambda route: with_model(raw, body, route),
            incoming_headers=headers_of(request),
            stream=False,
            expect_json=True,
            attempt_log=record.attempt_log,
        )
    pipeline.note_exchange(record, exchange, metered=metered)
    if metered and exchange.data is not None:
        record.usage = usage_from_openai(exchange.data.get("usage"))
    return _answer(pipeline, record, exchange)


def with_query(path: str, request: Request) -> str:
    query = request.url.query
    return f"{path}?{query}" if query else path


def _asks_stream(request: Request) -> bool:
    return request.query_params.get("stream", "").lower() == "true"


def _answer(pipeline: Pipeline, record: RequestRecord, exchange: Exchange) -> Response:
    response = replies.answer(record, exchange.response)
    notify_soon(pipeline.observers, record)
    return response
