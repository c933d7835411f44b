"""``POST /v1/messages``: the chat flow (count, decide, admit, transform, forward, meter, respond) through
the Messages adapter, ``gateway.fronts.messages.front``; ``gateway.proxy.pipeline.Pipeline.messages``
delegates here.

What differs from chat and Responses:

- only models of ``kind: anthropic`` providers serve it (the gateway does not translate between APIs); a
  reroute or a fallback to another kind of provider is left out;
- the count is an estimate (Claude's tokenizer is not public): near a line it is confirmed with the
  provider's ``count_tokens`` when the provider offers it (``gateway.fronts.messages.confirm``), else decided
  at the top of its error band (``policies.margin``);
- the query string (``?beta=true``) goes upstream with the request;
- server-side tools (``web_search_*``, ``web_fetch_*``, ...) are checked against the tenant's allowance and
  held at their ``max_uses`` (``gateway.servertools``);
- a request sent to another model than the one asked for (a reroute, a fallback) goes without the
  thinking blocks whose signatures only the model asked for can verify, and says so in
  ``x-gateway-thinking-dropped`` (``gateway.fronts.messages.thinking``); in the middle of a tool loop, whose
  assistant message must then start with its thinking, it goes without ``thinking`` for that turn.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

import orjson
from starlette.requests import Request
from starlette.responses import Response

from gateway.base.errors import InvalidRequest
from gateway.base.record import notify_soon
from gateway.config.auth import allow_model
from gateway.config.runtime import Route
from gateway.core import body as bodies
from gateway.core.admission import Hold, admitted
from gateway.core.body import headers_of
from gateway.core.planning import Plan, planned_body
from gateway.core.shared_objects import check_shared
from gateway.core.tags import request_tags
from gateway.experiments.notes import ANSWER, SHADOW_JOBS
from gateway.fronts.messages import reply
from gateway.fronts.messages.confirm import confirmer
from gateway.fronts.messages.front import MESSAGES, check_messages
from gateway.fronts.messages.references import messages_references
from gateway.fronts.messages.replay import MESSAGES_REPLAY
from gateway.fronts.messages.stream import answer_of
from gateway.fronts.messages.thinking import for_another_model
from gateway.fronts.responses.calls import with_query
from gateway.responsecache.flow import Lookup
from gateway.responsecache.messages import MessagesShape
from gateway.servertools.allowance import check_allowed
from gateway.servertools.requested import messages_tools
from gateway.upstream.calls import send

if TYPE_CHECKING:
    from gateway.proxy.pipeline import Pipeline

THINKING_DROPPED = "x-gateway-thinking-dropped"
MESSAGES_SHAPE = MessagesShape()


async def create(pipeline: Pipeline, request: Request) -> Response:
    record = pipeline.begin(request, "messages")
    hold = Hold(pipeline.budgets)
    async with pipeline.failing(record, hold):
        runtime = pipeline.store.current
        record.tenant = pipeline.authenticate(runtime, request)
        raw = await bodies.read_body(request, runtime.config.limits.max_body_bytes)
        body = bodies.parse_object(raw)
        record.requested_model = model = check_messages(body)
        if record.tenant.models is not None:  # a managed key's allow-list
            allow_model(record.tenant, model)
        record.tags = request_tags(headers_of(request), record.tenant)  # metadata holds only user_id
        tools = messages_tools(body, default_uses=runtime.config.limits.held_tool_uses)
        check_allowed(runtime.config.tenants.get(record.tenant.name), tools)
        record.stream = body.get("stream") is True
        candidates = anthropic_routes(runtime.serving(model, "chat"), model)
        check_shared(runtime, record.tenant.name, messages_references(body))
        headers = headers_of(request)
        lookup: Lookup | None = None
        if record.tenant.name in runtime.response_caches:
            lookup = await pipeline.response_cache.look(
                runtime, record, MESSAGES_SHAPE, body, headers, query=request.url.query
            )
            if lookup is not None and lookup.entry is not None:
                return pipeline.response_cache.answer(record, lookup, pipeline.observers)
        if runtime.experiments.splits:
            routed = await pipeline.experiments.route(
                runtime, record, body, headers, lambda: MESSAGES.messages(body), api="anthropic"
            )
            if routed is not None:
                record.routed_model = model = routed
                candidates = anthropic_routes(runtime.serving(model, "chat"), model)
        confirm = confirmer(pipeline.pool, candidates[0], body, headers, query=request.url.query)
        always = confirm is not None and candidates[0].provider.confirm_messages_counts == "always"
        plan = await pipeline.plan(
            runtime, request, record, hold, body, len(raw), MESSAGES, None, confirm, model=model,
            confirm_always=always, tools=tools,
        )  # fmt: skip
        decided = plan.decision.model if plan.decision is not None else model
        routes = anthropic_routes(admitted(runtime, plan, model), decided)
        sent = Bodies(raw, plan, asked=candidates[0])
        exchange = await send(
            pipeline.pool,
            routes,
            path=with_query("/messages", request),
            body_for=sent.for_route,
            incoming_headers=headers,
            stream=record.stream,
            expect_json=not record.stream,
            attempt_log=record.attempt_log,
        )
    await pipeline.note_sent(runtime, record, plan, exchange, body)
    if runtime.experiments.shadows:
        pipeline.experiments.watch(
            runtime,
            record,
            body,
            headers,
            MESSAGES,
            MESSAGES_REPLAY,
            path=with_query("/messages", request),
            api="anthropic",
        )
        if record.note(SHADOW_JOBS) and not record.stream:
            record.put(ANSWER, answer_of(exchange.data))
    extra = sent.headers(exchange.route)
    if record.stream:
        called = exchange.route.public_model
        response: Response = reply.relay(
            record,
            exchange,
            extra=extra,
            count_text=lambda text: runtime.counter.count_text(called, text),
            done=lambda: notify_soon(pipeline.observers, record),
        )
    else:
        response = reply.complete(record, exchange, extra=extra)
        notify_soon(pipeline.observers, record)
    return response if lookup is None else pipeline.response_cache.keep(record, lookup, response)


def anthropic_routes(routes: Iterable[Route], model: str) -> tuple[Route, ...]:
    """The routes that speak Messages (``kind: anthropic`` providers), in order; a 400 when none does."""
    served = tuple(route for route in routes if route.provider.kind == "anthropic")
    if not served:
        raise InvalidRequest(
            f"The model '{model}' is not served by an Anthropic provider (kind: anthropic), so it cannot "
            "be called on /v1/messages (its API is /v1/chat/completions or /v1/responses).",
            param="model",
            code="model_not_supported",
        )
    return served


class Bodies:
    """The body each route gets: the planned one, and for another model than the one asked for, without
    the thinking blocks it could not verify (how many were left out, per route, for the header)."""

    def __init__(self, raw: bytes, plan: Plan, *, asked: Route) -> None:
        self._raw = raw
        self._plan = plan
        self._asked = asked.upstream_model
        self._dropped: dict[str, int] = {}

    def for_route(self, route: Route) -> bytes:
        if route.upstream_model == self._asked:
            return planned_body(self._raw, self._plan, route)
        changed, dropped = for_another_model(self._plan.body, route.upstream_model)
        if not dropped:
            return planned_body(self._raw, self._plan, route)
        self._dropped[route.public_model] = dropped
        return orjson.dumps(changed)

    def headers(self, route: Route) -> dict[str, str]:
        dropped = self._dropped.get(route.public_model)
        return {THINKING_DROPPED: str(dropped)} if dropped else {}
