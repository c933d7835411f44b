"""``POST /v1/responses``: the chat flow through the Responses adapter (``gateway.fronts.responses.front``);
history stored upstream (``previous_response_id``) is estimated from what the gateway remembered of that
response, and a chained turn goes to the provider that stores it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import Response

from gateway.base.record import notify_soon
from gateway.config.auth import allow_model
from gateway.core import body as bodies
from gateway.core.admission import Hold, admitted
from gateway.core.body import headers_of
from gateway.core.planning import planned_body
from gateway.core.tags import request_tags
from gateway.experiments.notes import ANSWER, SHADOW_JOBS
from gateway.fronts.responses import reply as responses_reply
from gateway.fronts.responses.chain import chain_notice, route_for_chain, stored_history, with_provider
from gateway.fronts.responses.confirm import confirmer
from gateway.fronts.responses.front import RESPONSES, check_responses
from gateway.fronts.responses.memory import remembering
from gateway.fronts.responses.ownership import check_references
from gateway.fronts.responses.replay import RESPONSES_REPLAY
from gateway.fronts.responses.stream import answer_of
from gateway.responsecache.flow import Lookup
from gateway.responsecache.responses import ResponsesShape
from gateway.servertools.allowance import check_allowed
from gateway.servertools.requested import responses_tools
from gateway.upstream.calls import send

if TYPE_CHECKING:
    from gateway.fronts.responses.stored import StoredResponses
    from gateway.proxy.pipeline import Pipeline


async def create(pipeline: Pipeline, responses: StoredResponses, request: Request) -> Response:
    record = pipeline.begin(request, "responses")
    hold = Hold(pipeline.budgets)
    async with pipeline.failing(record, hold):
        runtime = pipeline.store.current
        record.tenant = tenant = pipeline.authenticate(runtime, request)
        raw = await bodies.read_body(request, runtime.config.limits.max_body_bytes)
        body = bodies.parse_object(raw)
        record.requested_model = model = check_responses(body)
        if record.tenant.models is not None:  # a managed key's allow-list
            allow_model(record.tenant, model)
        record.tags = request_tags(headers_of(request), tenant, body.get("metadata"))
        tools = responses_tools(body, default_uses=runtime.config.limits.held_tool_uses)
        check_allowed(runtime.config.tenants.get(tenant.name), tools)
        record.stream = body.get("stream") is True
        candidates = runtime.serving(model, "chat")
        previous = body.get("previous_response_id")
        remembered = await check_references(responses.memory, runtime, tenant.name, body)
        stored = stored_history(previous, remembered)
        lookup: Lookup | None = None
        if tenant.name in runtime.response_caches:
            lookup = await pipeline.response_cache.look(
                runtime, record, RESPONSES_SHAPE, body, headers_of(request)
            )
            if lookup is not None and lookup.entry is not None:
                return pipeline.response_cache.answer(record, lookup, pipeline.observers)
        if runtime.experiments.splits:
            routed = await pipeline.experiments.route(
                runtime,
                record,
                body,
                headers_of(request),
                lambda: RESPONSES.messages(body),
                chained_model=remembered.model if remembered is not None else None,
            )
            if routed is not None:
                record.routed_model = model = routed
                candidates = runtime.serving(routed, "chat")
        counted_by = route_for_chain(candidates, remembered) if stored else candidates[0]
        confirm = confirmer(pipeline.pool, counted_by, body, headers_of(request))
        plan = await pipeline.plan(
            runtime, request, record, hold, body, len(raw), RESPONSES, stored, confirm, model=model,
            tools=tools,
        )  # fmt: skip
        routes = admitted(runtime, plan, model)
        if stored is not None:
            provider = remembered.provider if remembered else candidates[0].provider_name
            routes = with_provider(routes, provider, stored.reference)
            decision = plan.decision
            confirmed = plan.confirmed_tokens is not None
            unknown = remembered is None and not confirmed
            if decision is not None and (unknown or decision.tokens >= decision.bands.warning):
                notice = chain_notice(stored, remembered, decision.tokens, confirmed=confirmed)
                record.warnings = (*record.warnings, notice)
        exchange = await send(
            pipeline.pool,
            routes,
            path="/responses",
            body_for=lambda route: planned_body(raw, plan, route),
            incoming_headers=headers_of(request),
            stream=record.stream,
            expect_json=not record.stream,
            attempt_log=record.attempt_log,
        )
    await pipeline.note_sent(runtime, record, plan, exchange, body if stored is None else None)
    if runtime.experiments.shadows and stored is None:
        pipeline.experiments.watch(runtime, record, body, headers_of(request), RESPONSES, RESPONSES_REPLAY)
        if record.note(SHADOW_JOBS) and not record.stream:
            record.put(ANSWER, answer_of(exchange.data))
    remember = remembering(
        responses.memory,
        record,
        keep=body.get("store") is not False,
        background=body.get("background") is True,
    )
    if record.stream:
        response: Response = responses_reply.relay(
            record, exchange, remember=remember, done=lambda: notify_soon(pipeline.observers, record)
        )
    else:
        response = await responses_reply.complete(record, exchange, remember=remember)
        notify_soon(pipeline.observers, record)
    return response if lookup is None else pipeline.response_cache.keep(record, lookup, response)


RESPONSES_SHAPE = ResponsesShape()
