"""One request, top to bottom: authenticate, parse, route, forward, meter, respond.

Route handlers stay a few lines; this module reads in the order of the request flow. The fronts' flows
live beside their adapters (``gateway.fronts.chat``, ``gateway.fronts.responses.create``,
``gateway.fronts.messages.pipeline``, ``gateway.fronts.forwarded`` for embeddings and passthrough) and call
the steps here: beginning a request, planning, noting what was sent, failing, responding.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from functools import partial
from typing import TYPE_CHECKING, Any

import redis.asyncio as aioredis
from starlette.requests import Request
from starlette.responses import Response

from compressors.lru import Lru
from gateway.base.background import Background
from gateway.base.errors import ClientClosedRequest, GatewayError, UpstreamError
from gateway.base.record import NO_ACTION, Observer, RequestRecord, notify, notify_soon
from gateway.base.types import Tenant
from gateway.config.auth import presented_key
from gateway.config.rate_limits import Scoped
from gateway.config.reload import ConfigStore
from gateway.config.runtime import Runtime
from gateway.config.schema.root import prompt_cache_of
from gateway.conversations.facts import cache_facts
from gateway.conversations.notes import LOOKED, TRACE
from gateway.conversations.pricing import counterfactual_of, look_up, rewritten_before
from gateway.conversations.requests import conversation_trace, look_up_before, remember_request, tracked
from gateway.conversations.store import ConversationStore
from gateway.core import rate_limits, replies
from gateway.core.admission import Hold, ceiling_nanos
from gateway.core.attempts import note_timeouts, note_upstream_failure
from gateway.core.body import headers_of
from gateway.core.count_limit import CountLimiter
from gateway.core.front import CHAT, Front
from gateway.core.metering import LedgerRecorder
from gateway.core.planning import Plan, StoredHistory, plan_chat
from gateway.core.request_ids import client_request_id, new_request_id
from gateway.core.transforms import CompressorTransforms
from gateway.experiments.live import Experiments
from gateway.experiments.notes import NEW_CONVERSATION
from gateway.experiments.trouble import ErrorCount
from gateway.keys.live import ManagedKeys
from gateway.ledger import Budgets
from gateway.proxy.precompress import precompress_after
from gateway.ratelimits.limiter import RateLimiter
from gateway.ratelimits.settler import RateSettler
from gateway.responsecache.flow import ResponseCache
from gateway.sampling.decide import is_probe
from gateway.servertools.requested import NO_TOOLS, RequestedTools
from gateway.telemetry.context import begin_trace, note_parameters
from gateway.tokens.counter import TokenCount
from gateway.upstream.calls import Exchange
from gateway.upstream.clients import UpstreamPool
from gateway.upstream.provider_count import Confirm
from policies import Action, Decision
from policies.facts import CacheFacts

if TYPE_CHECKING:
    from compressors.retrieval.index import DocumentIndex

RECALL_INDEXES = 32
"""Recall indexes of summarised spans kept in the process (a compacted conversation recalls from the same
span every turn)."""


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
        experiment_errors: ErrorCount | None = None,
        tracing: bool = False,
        managed_keys: ManagedKeys | None = None,
    ) -> None:
        self.store = store
        self.managed_keys = managed_keys
        """The keys managed through the admin API, asked after the config's while ``keys.managed`` is on."""
        self.pool = pool
        self.redis = redis
        self.observers = observers
        recorder = next((each for each in observers if isinstance(each, LedgerRecorder)), None)
        self.cost_headers = recorder.cost_headers if recorder is not None else None
        """Prices a request for its answer's headers (the ledger's own pricing)."""
        self.background = background
        self.budgets = budgets
        self.retrievers: dict[Any, Any] = {}
        self.recall_memory: Lru[DocumentIndex] = Lru(RECALL_INDEXES)
        self.conversations = conversations or ConversationStore(
            redis, prefix=store.current.config.ledger.key_prefix
        )
        self.count_limiter = CountLimiter(redis, prefix=store.current.config.ledger.key_prefix)
        self.response_cache = ResponseCache(
            redis, prefix=store.current.config.ledger.key_prefix, background=background
        )
        self.rate_limiter = RateLimiter(
            redis, prefix=store.current.config.ledger.key_prefix, config=lambda: store.current.config.ledger
        )
        self.rate_settler = RateSettler(self.rate_limiter)
        self.experiments = Experiments(
            store=store,
            pool=pool,
            redis=redis,
            observers=observers,
            background=background,
            services=self,
            count_error=experiment_errors,
        )
        # after the ledger's observer: they read the cost it sets
        self.observers = (*observers, self.rate_settler, self.experiments)
        self.tracing = tracing
        """Requests are traced (``gateway.telemetry``): each notes its trace context and attempts."""

    # --- steps 1-2: who is calling, and what do they send -------------------------------------------

    def authenticate(self, runtime: Runtime, request: Request) -> Tenant:
        managed = self.managed_keys if runtime.config.keys.managed else None
        return runtime.keyring.resolve(presented_key(headers_of(request)), managed)

    def key_limits(self, tenant: Tenant) -> Scoped | None:
        """A managed key's own rate limits (the config's book holds only the config's keys')."""
        if not tenant.managed or self.managed_keys is None:
            return None
        return self.managed_keys.limits_of(tenant.key_id)

    def begin(self, request: Request, endpoint: str) -> RequestRecord:
        headers = headers_of(request)
        record = RequestRecord(
            request_id=new_request_id(), endpoint=endpoint, client_request_id=client_request_id(headers)
        )
        record.probe = is_probe(headers)
        record.cost_headers = self.cost_headers
        if self.tracing:
            begin_trace(record, headers)
        request.state.request_id = record.request_id
        request.state.client_request_id = record.client_request_id
        return record

    # --- steps 3-6: count, decide, admit, transform (every front's flow calls them) -------------------

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
        tools: RequestedTools = NO_TOOLS,
    ) -> Plan:
        """Steps 3-6: count, decide, admit (the budget hold), transform; the plan lands in the record.
        ``model``: the model to plan for, when a split experiment routed the request to another than the
        one it asked for; ``tools``: the server-side tools it offers (their uses are held too)."""
        assert record.tenant is not None and record.requested_model is not None
        model = model or record.requested_model
        caps = front.caps(body)
        if record.attempt_log is not None:  # traced
            note_parameters(record, body)

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
            record.put(LOOKED, looked)
            cache = prompt_cache_of(runtime.config, model)
            return cache_facts(looked.recalled, looked.chain, model=model, cache=cache, now_ms=now_ms())

        caller = record.tenant

        async def admit(tokens: int, decision: Decision | None) -> None:
            def ceiling() -> int:
                return ceiling_nanos(runtime, model, decision, tokens, caps, tools)

            max_cost: Callable[[], int] = ceiling
            if runtime.rate_limits or caller.managed:  # empty unless some tenant or key has limits
                max_cost = await rate_limits.admit(
                    self.rate_limiter,
                    runtime,
                    request,
                    record,
                    tokens,
                    caps,
                    max_cost,
                    key_limits=self.key_limits(caller),
                )
            await hold.take(runtime, record, headers_of(request), max_cost)
            if record.note(NEW_CONVERSATION) is not None:  # a split's first turn: its arm is kept from now on
                self.experiments.admitted(record)

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
            if plan.changed and record.note(LOOKED) is None and plan.count is not None:
                # the state before this request prices its counterfactual: read it before writing
                record.put(LOOKED, await look_up(
                    self.conversations, tenant=record.tenant.name, model=model, front=front, body=body,
                    count=plan.count,
                ))  # fmt: skip
            elif record.note(LOOKED) is None:  # read while the upstream answers, before the state is written
                record.looking = asyncio.get_running_loop().create_task(
                    look_up_before(self.conversations, record, plan, model=model, front=front, body=body)
                )
            self.background.spawn(
                remember_request(self.conversations, runtime, record, plan, body), name="conversation_state"
            )
        return plan

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
        # x-gateway-proposed-action: observe mode or passthrough sent the request unchanged although the
        # band's action is another. In enforce mode the headline may differ from the band's action too (an
        # over-cliff retrieve that compressing alone settled): that was done, not proposed.
        forwarded = decision.action is Action.FORWARD and decision.proposed is not Action.FORWARD
        if (decision.observe or decision.passthrough) and forwarded:
            record.proposed_action = decision.proposed.value

    def after_response(self, runtime: Runtime, record: RequestRecord, plan: Plan) -> None:
        """Pre-compression, when the decision asks for it (``gateway.proxy.precompress``)."""
        precompress_after(
            runtime,
            record,
            plan,
            transforms_for=partial(self.transforms_for, runtime),
            conversations=self.conversations,
            background=self.background,
            observers=self.observers,
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
        if record.looking is not None:
            await record.looking
        record.forwarded_tokens = plan.forwarded_tokens
        record.transformed = plan.changed
        record.counts_estimated = plan.estimated
        tenant = runtime.config.tenants.get(record.tenant.name) if record.tenant else None
        if plan.changed and tenant is not None and tenant.report_prompt_tokens == "received":
            record.report_prompt_tokens = record.prompt_tokens
        if body is not None:
            called = exchange.route.public_model
            trace = conversation_trace(runtime, record, plan, body, called_model=called)
            record.put(TRACE, trace)
            looked = record.note(LOOKED)
            if trace is not None and looked is not None:
                trace.adopt(looked.chain)
            if trace is not None and (plan.changed or rewritten_before(looked)):
                record.counterfactual = await counterfactual_of(self.conversations, trace, looked)
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


def now_ms() -> int:
    return int(time.time() * 1000)
