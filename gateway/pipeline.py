"""One request, top to bottom: authenticate, parse, route, forward, meter, respond.

Route handlers stay a few lines; this module reads in the order of the request flow.
"""

from __future__ import annotations

import re
import secrets
import time
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import redis.asyncio as aioredis
from starlette.requests import Request
from starlette.responses import Response

from compressors.lru import Lru
from gateway import body as bodies
from gateway import replies
from gateway.admission import Hold, ceiling_nanos, passthrough_ceiling_nanos
from gateway.auth import presented_key
from gateway.background import Background
from gateway.body import headers_of
from gateway.config import prompt_cache_of
from gateway.conversations.facts import cache_facts
from gateway.conversations.pricing import counterfactual_of, look_up
from gateway.conversations.recorder import remember_state
from gateway.conversations.store import ConversationStore
from gateway.conversations.trace import ConversationTrace, trace_of
from gateway.errors import (
    ClientClosedRequest,
    GatewayError,
    UpstreamError,
    UpstreamExhausted,
    UpstreamInvalidAnswer,
)
from gateway.experiments.answer import answer_of
from gateway.experiments.live import Experiments
from gateway.ledger import Budgets
from gateway.metering import max_cost_nanos
from gateway.money import nanos_from_usd
from gateway.passthrough import passthrough_grant, passthrough_route
from gateway.planning import CHAT, Front, Plan, StoredHistory, plan_chat, planned_body, with_model
from gateway.record import NO_ACTION, TIMEOUT, Observer, RequestRecord, SideCall, notify, notify_soon
from gateway.reload import ConfigStore
from gateway.responses import reply as responses_reply
from gateway.responses.calls import with_query
from gateway.responses.chain import chain_notice, route_for_chain, stored_history, with_provider
from gateway.responses.confirm import Confirm, confirmer
from gateway.responses.front import RESPONSES, check_responses
from gateway.responses.memory import ResponseMemory, remembering
from gateway.responses.ownership import check_references
from gateway.responses.pending import Settler
from gateway.runtime import Route, Runtime
from gateway.sampling.decide import is_probe
from gateway.sampling.logprobs import LogprobTally
from gateway.streaming import ChatStreamReader
from gateway.tokens.counter import TokenCount
from gateway.transforms import CompressorTransforms
from gateway.types import Tenant
from gateway.upstream import Exchange, TimedOut, UpstreamPool, send
from policies import Decision
from policies.facts import CacheFacts

if TYPE_CHECKING:
    from compressors.retrieval.index import DocumentIndex

RECALL_INDEXES = 32
"""Recall indexes of summarised spans kept in the process (a compacted conversation recalls from the same
span every turn)."""
_CLIENT_REQUEST_ID = re.compile(r"[A-Za-z0-9._:\-]{1,128}")


def new_request_id() -> str:
    """The gateway's own id of a request: unique, the only key of its cost events, budget hold and dedup."""
    return f"req_{secrets.token_hex(12)}"


def client_request_id(headers: Mapping[str, str]) -> str | None:
    """The client's ``x-request-id``, when it is a plain token: a correlation field only (logged, exported,
    echoed), never an identity, since agent loops and retrying clients reuse their trace ids."""
    incoming = headers.get("x-request-id")
    if incoming and _CLIENT_REQUEST_ID.fullmatch(incoming):
        return incoming
    return None


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
        conversations: ConversationStore | None = None,
    ) -> None:
        self.store = store
        self.pool = pool
        self.redis = redis
        self.observers = observers
        self.background = background
        self.budgets = budgets
        self.retrievers: dict[Any, Any] = {}
        self.recall_memory: Lru[DocumentIndex] = Lru(RECALL_INDEXES)
        self.memory = ResponseMemory(redis, prefix=store.current.config.ledger.key_prefix)
        self.conversations = conversations or ConversationStore(
            redis, prefix=store.current.config.ledger.key_prefix
        )
        self.settler = Settler(self.memory, observers=observers, store=store, pool=pool)
        self.experiments = Experiments(
            store=store, pool=pool, redis=redis, observers=observers, background=background, services=self
        )
        self.observers = (*observers, self.experiments)  # last: it reads the cost the ledger's observer set

    # --- steps 1-2: who is calling, and what do they send -------------------------------------------

    def authenticate(self, runtime: Runtime, request: Request) -> Tenant:
        return runtime.keyring.resolve(presented_key(headers_of(request)))

    def begin(self, request: Request, endpoint: str) -> RequestRecord:
        headers = headers_of(request)
        record = RequestRecord(
            request_id=new_request_id(), endpoint=endpoint, client_request_id=client_request_id(headers)
        )
        record.probe = is_probe(headers)
        request.state.request_id = record.request_id
        request.state.client_request_id = record.client_request_id
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
            runtime.serving(model, "chat")  # 404 for an unknown model, 400 for an embedding one: no counting
            if runtime.experiments.splits:
                routed = await self.experiments.route(
                    runtime, record, body, headers_of(request), lambda: body["messages"]
                )
                if routed is not None:
                    record.routed_model = model = routed
            plan = await self.plan(runtime, request, record, hold, body, len(raw), model=model)
            add_usage = record.stream and not _include_usage(body)
            exchange = await send(
                self.pool,
                admitted(runtime, plan, model),
                path="/chat/completions",
                body_for=lambda route: planned_body(raw, plan, route, add_usage=add_usage),
                incoming_headers=headers_of(request),
                stream=record.stream,
                expect_json=not record.stream,
            )
        await self.note_sent(runtime, record, plan, exchange, body)
        if runtime.experiments.shadows:
            self.experiments.watch(runtime, record, body, headers_of(request), CHAT)
            if record.shadow_jobs and not record.stream:
                record.answer = answer_of(exchange.data)
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
            candidates = runtime.serving(model, "chat")
            previous = body.get("previous_response_id")
            remembered = await check_references(self.memory, runtime, tenant.name, body)
            stored = stored_history(previous, remembered)
            if runtime.experiments.splits:
                routed = await self.experiments.route(
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
            confirm = confirmer(self.pool, counted_by, body, headers_of(request))
            plan = await self.plan(
                runtime, request, record, hold, body, len(raw), RESPONSES, stored, confirm, model=model
            )
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
                expect_json=not record.stream,
            )
        await self.note_sent(runtime, record, plan, exchange, body if stored is None else None)
        if runtime.experiments.shadows and stored is None:
            self.experiments.watch(runtime, record, body, headers_of(request), RESPONSES)
            if record.shadow_jobs and not record.stream:
                record.answer = answer_of(exchange.data)
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

    async def messages(self, request: Request) -> Response:
        """``POST /v1/messages``: the chat flow through the Messages adapter (``gateway.messages.pipeline``;
        imported here since it imports this module)."""
        from gateway.messages.pipeline import create

        return await create(self, request)

    async def messages_count_tokens(self, request: Request) -> Response:
        """``POST /v1/messages/count_tokens``: the provider's count, never below the gateway's own."""
        from gateway.messages.count_tokens import count_tokens

        return await count_tokens(self, request)

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
        *,
        model: str | None = None,
        confirm_always: bool = False,
    ) -> Plan:
        """Steps 3-6: count, decide, admit (the budget hold), transform; the plan lands in the record.
        ``model``: the model to plan for, when a split experiment routed the request to another than the
        one it asked for."""
        assert record.tenant is not None and record.requested_model is not None
        model = model or record.requested_model
        caps = {"max_completion_tokens": body.get("max_output_tokens")} if front is RESPONSES else body

        async def conversation(count: TokenCount) -> CacheFacts | None:
            assert record.tenant is not None
            looked = await look_up(
                self.conversations,
                tenant=record.tenant.name,
                model=model,
                front=front,
                body=body,
                count=count,
            )
            record.looked = looked
            cache = prompt_cache_of(runtime.config, model)
            return cache_facts(looked.recalled, looked.chain, model=model, cache=cache, now_ms=now_ms())

        async def admit(tokens: int, decision: Decision | None) -> None:
            await hold.take(
                runtime,
                record,
                headers_of(request),
                lambda: ceiling_nanos(runtime, model, decision, tokens, caps),
            )

        def rejected(plan: Plan) -> None:
            self.note_plan(record, plan)
            assert plan.decision is not None
            received = plan.received_tokens
            record.prompt_tokens = received if received is not None else plan.decision.tokens

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
            conversation=conversation,
            rejected=rejected,
            confirm_always=confirm_always,
        )
        self.note_plan(record, plan)
        record.confirmed_tokens = plan.confirmed_tokens
        # known now for an upstream failure's record (timed-out attempts are billed on them); the exact
        # counts replace them once a model answered (``note_sent``)
        record.prompt_tokens = plan.received_tokens
        decided = plan.decision.tokens if plan.decision is not None else None
        record.forwarded_tokens = plan.forwarded_tokens if plan.forwarded_tokens is not None else decided
        if stored is None and plan.decision is not None and (plan.changed or tracked(runtime, model, plan)):
            if plan.changed and record.looked is None and plan.count is not None:
                # the state before this request prices its counterfactual: read it before writing
                record.looked = await look_up(
                    self.conversations, tenant=record.tenant.name, model=model, front=front, body=body,
                    count=plan.count,
                )  # fmt: skip
            self.background.spawn(self.track(runtime, record, plan, body), name="conversation_state")
        return plan

    async def track(self, runtime: Runtime, record: RequestRecord, plan: Plan, body: dict[str, Any]) -> None:
        """Write the conversation's new state while the upstream answers, so that the next turn (an
        agent's comes the moment this one is answered) finds it (``gateway.conversations.recorder``)."""
        await plan.received()
        assert plan.decision is not None
        trace = conversation_trace(runtime, record, plan, body, called_model=plan.decision.model)
        if trace is None:
            return
        if record.looked is not None:
            trace.adopt(record.looked.chain)
        await remember_state(self.conversations, trace)

    async def embeddings(self, request: Request) -> Response:
        """``POST /v1/embeddings``: held at the most its input can cost (one token per byte at most)."""
        record = self.begin(request, "embeddings")
        hold = Hold(self.budgets)
        async with self.failing(record, hold):
            runtime = self.store.current
            record.tenant = self.authenticate(runtime, request)
            raw = await bodies.read_body(request, runtime.config.limits.max_body_bytes)
            body = bodies.parse_object(raw)
            record.requested_model = model = bodies.check_embeddings(body)
            candidates = runtime.serving(model, "embedding")
            await hold.take(
                runtime,
                record,
                headers_of(request),
                lambda: max(
                    max_cost_nanos(route.model, len(raw), body, output=False) for route in candidates
                ),
            )
            exchange = await send(
                self.pool,
                candidates,
                path="/embeddings",
                body_for=lambda route: with_model(raw, body, route),
                incoming_headers=headers_of(request),
                stream=False,
                expect_json=True,
            )
        self.note_exchange(record, exchange)
        return self.respond(record, exchange)

    async def passthrough(self, request: Request, path: str) -> Response:
        """Other /v1/* routes: only those the config's ``passthrough`` list grants the tenant, held and
        metered like any other call (``gateway.passthrough``)."""
        record = self.begin(request, "passthrough")
        hold = Hold(self.budgets)
        async with self.failing(record, hold):
            runtime = self.store.current
            record.tenant = self.authenticate(runtime, request)
            grant = passthrough_grant(runtime, request.method, path, record.tenant.name)
            raw = await bodies.read_body(request, runtime.config.limits.max_body_bytes)
            content_type = headers_of(request).get("content-type", "application/json")
            body = _json_body(raw, content_type)
            route = passthrough_route(runtime, grant, body)
            record.requested_model = record.called_model = route.public_model
            await hold.take(
                runtime,
                record,
                headers_of(request),
                lambda: passthrough_ceiling_nanos(grant, route, len(raw), body),
            )
            exchange = await send(
                self.pool,
                (route,),
                path=with_query(f"/{path}", request),
                body_for=lambda route: with_model(raw, body, route) if body else raw,
                incoming_headers=headers_of(request),
                stream=False,
                method=request.method,
                content_type=content_type,
            )
        self.note_exchange(record, exchange)
        record.flat_cost_nanos = nanos_from_usd(grant.route.price_usd)
        return self.respond(record, exchange)

    # --- steps 8-10: meter and respond ------------------------------------------------------------

    def transforms_for(self, runtime: Runtime, record: RequestRecord) -> CompressorTransforms:
        return CompressorTransforms(
            runtime=runtime,
            pool=self.pool,
            redis=self.redis,
            record=record,
            retrievers=self.retrievers,
            recall_memory=self.recall_memory,
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
        record.reason = decision.reason
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
        self,
        runtime: Runtime,
        record: RequestRecord,
        plan: Plan,
        exchange: Exchange,
        body: dict[str, Any] | None,
    ) -> None:
        """A model answered: what it was, the request's exact counts, its part of its conversation (``body``
        None: the conversation is stored upstream, out of sight), and the work left for afterwards."""
        self.note_exchange(record, exchange)
        record.prompt_tokens = await plan.received()
        record.forwarded_tokens = plan.forwarded_tokens
        record.transformed = plan.changed
        tenant = runtime.config.tenants.get(record.tenant.name) if record.tenant else None
        if plan.changed and tenant is not None and tenant.report_prompt_tokens == "received":
            record.report_prompt_tokens = record.prompt_tokens
        if body is not None:
            called = exchange.route.public_model
            record.conversation = trace = conversation_trace(runtime, record, plan, body, called_model=called)
            if trace is not None and record.looked is not None:
                trace.adopt(record.looked.chain)
            if trace is not None and plan.changed:
                record.counterfactual = await counterfactual_of(self.conversations, trace, record.looked)
        self.after_response(runtime, record, plan)

    def note_exchange(self, record: RequestRecord, exchange: Exchange, *, metered: bool = True) -> None:
        """Who answered; ``metered``: a model ran for it (the request gets a cost event)."""
        if metered:
            record.called_model = exchange.route.public_model
        record.provider = exchange.route.provider_name
        record.attempts = exchange.attempts
        record.retries = exchange.attempts - 1
        record.status = exchange.response.status_code
        note_timeouts(record, exchange.timed_out)

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
        if record.policy is None and record.attempts == 0 and not isinstance(exc, UpstreamError):
            record.action = NO_ACTION  # failed before anything was decided or sent
        if isinstance(exc, GatewayError):
            record.status = exc.status_code
            record.error_type = exc.code or exc.error_type
            record.client_disconnected = isinstance(exc, ClientClosedRequest)
            note_timeouts(record, getattr(exc, "timed_out", ()))
            if isinstance(exc, UpstreamError):
                note_upstream_failure(record, exc)
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
            reader=ChatStreamReader(
                strip_usage_chunk=strip_usage_chunk,
                started=exchange.started,
                report_prompt_tokens=record.report_prompt_tokens,
                collect_calls=bool(record.shadow_jobs),
            ),
            tally=LogprobTally() if logprobs else None,
            done=lambda: notify(self.observers, record),
        )


def conversation_trace(
    runtime: Runtime, record: RequestRecord, plan: Plan, body: dict[str, Any], *, called_model: str
) -> ConversationTrace | None:
    """The request's part of its conversation (``gateway.conversations.trace``), when it has one."""
    if record.tenant is None or record.requested_model is None:
        return None
    return trace_of(
        runtime.config,
        tenant=record.tenant.name,
        model=record.routed_model or record.requested_model,
        called_model=called_model,
        body=body,
        plan=plan,
        started_at=record.started_at,
    )


def tracked(runtime: Runtime, model: str, plan: Plan) -> bool:
    """Whether the request may be large enough to leave its conversation's state (its exact count when
    known, else the bound it was decided on): the many small requests cost nothing here."""
    tokens = (
        plan.received_tokens
        if plan.received_tokens is not None
        else plan.decision.tokens
        if plan.decision
        else 0
    )
    cache = prompt_cache_of(runtime.config, model)
    return tokens >= max(cache.min_prefix_tokens, runtime.config.limits.track_conversations_from)


def now_ms() -> int:
    return int(time.time() * 1000)


def note_upstream_failure(record: RequestRecord, exc: UpstreamError) -> None:
    """The attempts a failed upstream call made and, when all failed, why each did."""
    if exc.attempts:
        record.attempts = exc.attempts
        record.retries = exc.attempts - 1
    if isinstance(exc, UpstreamExhausted | UpstreamInvalidAnswer):
        record.error_detail = exc.message


def note_timeouts(record: RequestRecord, timed_out: Iterable[object]) -> None:
    """Attempts that timed out after their request went out: the provider may bill them, so each is an
    estimated side call of kind ``timeout`` (its input as the request's, no output)."""
    for attempt in timed_out:
        if isinstance(attempt, TimedOut):
            route = attempt.route
            record.side_calls.append(
                SideCall(TIMEOUT, route.public_model, route.provider_name, None, attempt.seconds, 504)
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


def _json_body(raw: bytes, content_type: str) -> dict[str, Any] | None:
    """A passthrough body sent as JSON, parsed and checked like every other (a model to route by)."""
    if not raw or not content_type.startswith("application/json"):
        return None
    return bodies.parse_object(raw)
