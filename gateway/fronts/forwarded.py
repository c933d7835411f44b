"""The calls the gateway forwards without policies: embeddings, and the other /v1/* paths the config's
``passthrough`` list grants (``gateway.config.passthrough``). Both are held and metered like every call."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import Response

from gateway.base.money import nanos_from_usd
from gateway.config.auth import allow_model
from gateway.config.passthrough import passthrough_grant, passthrough_route
from gateway.core import body as bodies
from gateway.core import rate_limits
from gateway.core.admission import Hold, passthrough_ceiling_nanos
from gateway.core.body import headers_of
from gateway.core.metering import max_cost_nanos
from gateway.core.planning import with_model
from gateway.core.tags import request_tags
from gateway.fronts.responses.calls import with_query
from gateway.upstream.calls import send

if TYPE_CHECKING:
    from gateway.proxy.pipeline import Pipeline


async def embeddings(pipeline: Pipeline, request: Request) -> Response:
    """``POST /v1/embeddings``: held at the most its input can cost (one token per byte at most), and so
    counted against its rate limits (settled to its usage)."""
    record = pipeline.begin(request, "embeddings")
    hold = Hold(pipeline.budgets)
    async with pipeline.failing(record, hold):
        runtime = pipeline.store.current
        record.tenant = pipeline.authenticate(runtime, request)
        raw = await bodies.read_body(request, runtime.config.limits.max_body_bytes)
        body = bodies.parse_object(raw)
        record.requested_model = model = bodies.check_embeddings(body)
        if record.tenant.models is not None:  # a managed key's allow-list
            allow_model(record.tenant, model)
        record.tags = request_tags(headers_of(request), record.tenant)
        candidates = runtime.serving(model, "embedding")

        def ceiling() -> int:
            return max(max_cost_nanos(route.model, len(raw), body, output=False) for route in candidates)

        max_cost: Callable[[], int] = ceiling
        if runtime.rate_limits or record.tenant.managed:  # empty unless some tenant or key has limits
            max_cost = await rate_limits.admit(
                pipeline.rate_limiter,
                runtime,
                request,
                record,
                len(raw),
                {},
                max_cost,
                output=False,
                key_limits=pipeline.key_limits(record.tenant),
            )
        await hold.take(runtime, record, headers_of(request), max_cost)
        exchange = await send(
            pipeline.pool,
            candidates,
            path="/embeddings",
            body_for=lambda route: with_model(raw, body, route),
            incoming_headers=headers_of(request),
            stream=False,
            expect_json=True,
            attempt_log=record.attempt_log,
        )
    pipeline.note_exchange(record, exchange)
    return pipeline.respond(record, exchange)


async def passthrough(pipeline: Pipeline, request: Request, path: str) -> Response:
    """Other /v1/* routes: only those the config's ``passthrough`` list grants the tenant, held and
    metered like any other call (``gateway.config.passthrough``)."""
    record = pipeline.begin(request, "passthrough")
    hold = Hold(pipeline.budgets)
    async with pipeline.failing(record, hold):
        runtime = pipeline.store.current
        record.tenant = pipeline.authenticate(runtime, request)
        grant = passthrough_grant(runtime.passthrough, request.method, path, record.tenant.name)
        record.tags = request_tags(headers_of(request), record.tenant)
        raw = await bodies.read_body(request, runtime.config.limits.max_body_bytes)
        content_type = headers_of(request).get("content-type", "application/json")
        body = _json_body(raw, content_type)
        route = passthrough_route(runtime.routes, grant, body)
        record.requested_model = route.public_model  # called_model once it answered: no event before
        if record.tenant.models is not None:  # a managed key's allow-list
            allow_model(record.tenant, route.public_model)
        await hold.take(
            runtime,
            record,
            headers_of(request),
            lambda: passthrough_ceiling_nanos(grant, route, len(raw), body),
        )
        exchange = await send(
            pipeline.pool,
            (route,),
            path=with_query(f"/{path}", request),
            body_for=lambda route: with_model(raw, body, route) if body else raw,
            incoming_headers=headers_of(request),
            stream=False,
            method=request.method,
            content_type=content_type,
            attempt_log=record.attempt_log,
        )
    pipeline.note_exchange(record, exchange)
    record.flat_cost_nanos = nanos_from_usd(grant.route.price_usd)
    return pipeline.respond(record, exchange)


def _json_body(raw: bytes, content_type: str) -> dict[str, Any] | None:
    """A passthrough body sent as JSON, parsed and checked like every other (a model to route by)."""
    if not raw or not content_type.startswith("application/json"):
        return None
    return bodies.parse_object(raw)
