"""One request, top to bottom: authenticate, parse, route, forward, meter, respond.

Route handlers stay a few lines; this module reads in the order of the request flow.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import redis.asyncio as aioredis
from starlette.requests import Request
from starlette.responses import Response

from gateway import body as bodies
from gateway import replies
from gateway.admission import Hold
from gateway.auth import presented_key
from gateway.background import Background
from gateway.body import headers_of
from gateway.errors import GatewayError, RouteNotFound
from gateway.ledger import Budgets
from gateway.metering import max_cost_nanos
from gateway.planning import CHAT, Front, Plan, StoredHistory, plan_chat, planned_body, with_model
from gateway.record import Observer, RequestRecord, notify, notify_soon
from gateway.reload import ConfigStore
from gateway.responses import reply as responses_reply
from gateway.responses.chain import chain_notice, route_for_chain, stored_history, with_provider
from gateway.responses.confirm import Confirm, confirmer
from gateway.responses.front import RESPONSES, check_responses
from gateway.responses.memory import ResponseMemory, remembering
from gateway.responses.pending import Settler
from gateway.runtime import Route, Runtime
from gateway.sampling.decide import is_probe
from gateway.sampling.logprobs import LogprobTally
from gateway.streaming import ChatStreamReader
from gateway.transforms import CompressorTransforms
from gateway.types import Tenant
from gateway.upstream import Exchange, UpstreamPool, send

_REQUEST_ID = re.compile(r"[A-Za-z0-9._:\-]{1,128}")


def request_id_for(headers: Mapping[str, str]) -> str:
    incoming = headers.get("x-request-id")
    if incoming and _REQUEST_ID.fullmatch(incoming):
        return incoming
    return f"req_{secrets.token_hex(12)}"


class Pipeline:
    def __init__(
        self,
        *,
        store: ConfigStore,
        pool: UpstreamPool,
        redis: aioredis.Redis,
        observers: tuple[Observer, ...],
        background: Background,
        budgets: Budgets,
    ) -> None:
        self.store = store
        self.pool = pool
        self.redis = redis
        self.observers = observers
        self.background = background
        self.budgets = budgets
        self.retrievers: dict[Any, Any] = {}
        self.memory = ResponseMemory(redis, prefix=store.current.config.ledger.key_prefix)
        self.settler = Settler(self.memory, observers=observers, store=store, pool=pool)

    # --- steps 1-2: who is calling, and what do they send -------------------------------------------

    def authenticate(self, runtime: Runtime, request: Request) -> Tenant:
        return runtime.keyring.resolve(presented_key(headers_of(request)))

    def begin(self, request: Request, endpoint: str) -> RequestRecord:
        record = RequestRecord(request_id=request_id_for(headers_of(request)), endpoint=endpoint)
        record.probe = is_probe(headers_of(request))
        request.state.request_id = record.request_id
        return record

    # --- the routes ---------------------------------------------------------------------------------

    async def chat(self, request: Request) -> Response:
        record = self.begin(request, "chat")
        hold = Hold(self.budgets)
        async with self.failing(record, hold):
            runtime = self.store.current
            record.tenant = self.authenticate(runtime, request)
            raw = await bodies.read_body(request, runtime.config.limits.max_body_bytes)
            body = bodies.parse_object(raw)
            record.requested_model = model = bodies.check_chat(body)
            record.stream = body.get("stream") is True
            runtime.candidates(model)  # 404 for an unknown model before any counting
            plan = await self.plan(runtime, request, record, hold, body, len(raw))
            add_usage = record.stream and not _include_usage(body)
            exchange = await send(
                self.pool,
                admitted(runtime, plan, record.requested_model),
                path="/chat/completions",
                body_for=lambda route: planned_body(raw, plan, route, add_usage=add_usage),
                incoming_headers=headers_of(request),
                stream=record.stream,
            )
        await self.note_sent(runtime, record, plan, exchange)
        if record.stream:
            return self.relay_stream(
                record, exchange, strip_usage_chunk=add_usage, logprobs=bool(body.get("logprobs"))
            )
        return self.respond(record, exchange)

    async def responses(self, request: Request) -> Response:
        """``POST /v1/responses``: the chat flow through the Responses adapter; history stored upstream
        (``previous_response_id``) is estimated from what the gateway remembered of that response."""
        record = self.begin(request, "responses")
        hold = Hold(self.budgets)
        async with self.failing(record, hold):
            runtime = self.store.current
            record.tenant = tenant = self.authenticate(runtime, request)
            raw = await bodies.read_body(request, runtime.config.limits.max_body_bytes)
            body = bodies.parse_object(raw)
            record.requested_model = model = check_responses(body)
            record.stream = body.get("stream") is True
            candidates = runtime.candidates(model)
            previous = body.get("previous_response_id")
            remembered = await self.memory.recall(tenant.name, previous)
            stored = stored_history(previous, remembered)
            counted_by = route_for_chain(candidates, remembered) if stored else candidates[0]
            confirm = confirmer(self.pool, counted_by, body, headers_of(request))
            plan = await self.plan(runtime, request, record, hold, body, len(raw), RESPONSES, stored, confirm)
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
                self.pool,
                routes,
                path="/responses",
                body_for=lambda route: planned_body(raw, plan, route),
                incoming_headers=headers_of(request),
                stream=record.stream,
            )
        await self.note_sent(runtime, record, plan, exchange)
        remember = remembering(
            self.memory,
            record,
            keep=body.get("store") is not False,
            background=body.get("background") is True,
        )
        if record.stream:
            return responses_reply.relay(
                record, exchange, remember=remember, done=lambda: notify(self.observers, record)
            )
        response = await responses_reply.complete(record, exchange, remember=remember)
        notify_soon(self.observers, record)
        return response

    async def plan(
        self,
        runtime: Runtime,
        request: Request,
        record: RequestRecord,
        hold: Hold,
        body: dict[str, Any],
        body_len: int,
        front: Front = CHAT,
        stored: StoredHistory | None = None,
        confirm: Confirm | None = None,
    ) -> Plan:
        """Steps 3-6: count, decide, admit (the budget hold), transform; the plan lands in the record."""
        assert record.tenant is not None and record.requested_model is not None
        model = record.requested_model
        caps = body if front is CHAT else {"max_completion_tokens": body.get("max_output_tokens")}

        async def admit(tokens: int) -> None:
            await hold.take(
                runtime,
                record,
                headers_of(request),
                lambda: max_cost_nanos(runtime.config.models.get(model), tokens, caps),
            )

        plan = await plan_chat(
            runtime,
            tenant=record.tenant.name,
            model=model,
            body=body,
            body_len=body_len,
            headers=headers_of(request),
            transforms=self.transforms_for(runtime, record),
            admit=admit,
            front=front,
            stored=stored,
            confirm=confirm,
        )
        self.note_plan(record, plan)
        record.confirmed_tokens = plan.confirmed_tokens
        return plan

    async def embeddings(self, request: Request) -> Response:
        return await self.forward_json(request, "embeddings", "/embeddings", bodies.check_embeddings)

    async def passthrough(self, request: Request, path: str) -> Response:
        """Other /v1/* routes: sent to the provider of the body's model, when the body names one."""
        record = self.begin(request, "passthrough")
        async with self.failing(record):
            runtime = self.store.current
            record.tenant = self.authenticate(runtime, request)
            raw = await bodies.read_body(request, runtime.config.limits.max_body_bytes)
            model = _model_of(raw, headers_of(request).get("content-type", ""))
            if model is None or model not in runtime.routes:
                raise RouteNotFound(
                    f"Unknown request URL: {request.method} /v1/{path}. The gateway cannot route it."
                )
            record.requested_model = model
            exchange = await send(
                self.pool,
                runtime.candidates(model)[:1],
                path=f"/{path}",
                body_for=lambda route: raw,
                incoming_headers=headers_of(request),
                stream=False,
                method=request.method,
            )
        self.note_exchange(record, exchange)
        return self.respond(record, exchange)

    async def forward_json(self, request: Request, endpoint: str, path: str, check: Any) -> Response:
        record = self.begin(request, endpoint)
        async with self.failing(record):
            runtime = self.store.current
            record.tenant = self.authenticate(runtime, request)
            raw = await bodies.read_body(request, runtime.config.limits.max_body_bytes)
            body = bodies.parse_object(raw)
            record.requested_model = check(body)
            exchange = await send(
                self.pool,
                runtime.candidates(record.requested_model),
                path=path,
                body_for=lambda route: with_model(raw, body, route),
                incoming_headers=headers_of(request),
                stream=False,
            )
        self.note_exchange(record, exchange)
        return self.respond(record, exchange)

    # --- steps 8-10: meter and respond ------------------------------------------------------------

    def transforms_for(self, runtime: Runtime, record: RequestRecord) -> CompressorTransforms:
        return CompressorTransforms(
            runtime=runtime, pool=self.pool, redis=self.redis, record=record, retrievers=self.retrievers
        )

    def note_plan(self, record: RequestRecord, plan: Plan) -> None:
        decision = plan.decision
        if decision is None:
            return
        record.action = decision.action.value
        record.band = decision.band.value
        record.policy = decision.policy
        record.warnings = (*decision.warnings, *record.warnings)  # the budget's, taken while planning
        record.above_cliff = decision.above_cliff
        if decision.proposed is not decision.action:
            record.proposed_action = decision.proposed.value

    def after_response(self, runtime: Runtime, record: RequestRecord, plan: Plan) -> None:
        """Pre-compression: build the summary the next turns will need, after this response, off-path."""
        decision = plan.decision
        if decision is None or not decision.precompress or record.tenant is None:
            return
        side = RequestRecord(
            request_id=f"{record.request_id}:precompress",
            endpoint="precompress",
            tenant=record.tenant,
            parent_id=record.request_id,
        )
        side.requested_model = record.requested_model
        transforms = self.transforms_for(runtime, side)
        self.background.spawn(
            transforms.precompute(plan.messages(), decision, record.tenant.name),
            name="precompress",
            then=lambda: notify(self.observers, side) if side.side_calls else None,
        )

    async def note_sent(
        self, runtime: Runtime, record: RequestRecord, plan: Plan, exchange: Exchange
    ) -> None:
        """A model answered: what it was, the request's exact counts, and the work left for afterwards."""
        self.note_exchange(record, exchange)
        record.prompt_tokens = await plan.received()
        record.forwarded_tokens = plan.forwarded_tokens
        self.after_response(runtime, record, plan)

    def note_exchange(self, record: RequestRecord, exchange: Exchange, *, metered: bool = True) -> None:
        """Who answered; ``metered``: a model ran for it (the request gets a cost event)."""
        if metered:
            record.called_model = exchange.route.public_model
        record.provider = exchange.route.provider_name
        record.retries = exchange.attempts - 1
        record.status = exchange.response.status_code

    @asynccontextmanager
    async def failing(self, record: RequestRecord, hold: Hold | None = None) -> AsyncIterator[None]:
        """A handler's steps up to the upstream's answer: whatever fails there (an error to answer with,
        or a bug) gives the budget hold back and is recorded once, then goes on to the error handlers."""
        try:
            yield
        except Exception as exc:
            if hold is not None:
                await hold.release()
            self.fail(record, exc)
            raise

    def fail(self, record: RequestRecord, exc: Exception) -> None:
        if isinstance(exc, GatewayError):
            record.status = exc.status_code
            record.error_type = exc.code or exc.error_type
        else:
            record.status = 500
            record.error_type = "internal_error"
        notify(self.observers, record)

    def respond(self, record: RequestRecord, exchange: Exchange) -> Response:
        response = replies.complete(record, exchange)
        notify_soon(self.observers, record)
        return response

    def relay_stream(
        self, record: RequestRecord, exchange: Exchange, *, strip_usage_chunk: bool, logprobs: bool = False
    ) -> Response:
        return replies.relay(
            record,
            exchange,
            reader=ChatStreamReader(strip_usage_chunk=strip_usage_chunk, started=exchange.started),
            tally=LogprobTally() if logprobs else None,
            done=lambda: notify(self.observers, record),
        )


def _include_usage(body: Mapping[str, Any]) -> bool:
    options = body.get("stream_options")
    return isinstance(options, dict) and options.get("include_usage") is True


def admitted(runtime: Runtime, plan: Plan, requested: str) -> tuple[Route, ...]:
    """The decided model, then those of its fallbacks whose bands admit the request as it will be sent."""
    decision = plan.decision
    if decision is None:
        return runtime.candidates(requested)
    first, *fallbacks = runtime.candidates(decision.model)
    bands = runtime.engine.bands
    return (
        first,
        *(
            route
            for route in fallbacks
            if route.public_model not in bands
            or bands[route.public_model].admits(decision.tokens, allow_over_cliff=decision.allow_over_cliff)
        ),
    )


def _model_of(raw: bytes, content_type: str) -> str | None:
    if not raw or not content_type.startswith("application/json"):
        return None
    data = bodies.json_object(raw)
    model = data.get("model") if data is not None else None
    return model if isinstance(model, str) else None
