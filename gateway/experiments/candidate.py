"""The candidate's copy of one sampled request: planned for the candidate (its bands, policies and
transforms), held against the experiment's budget, sent once, read to the end or to
``limits.shadow_max_response_bytes`` (``gateway.experiments.bounded``)."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Protocol

import orjson

from gateway.base.errors import BudgetExceeded, GatewayError
from gateway.base.money import usd
from gateway.base.record import Observer, RequestRecord, notify
from gateway.base.types import Usage
from gateway.config.runtime import Route, Runtime
from gateway.config.schema.experiments import ExperimentConfig, bill_tenant
from gateway.core.admission import ceiling_nanos
from gateway.core.planning import Plan, Transforms, plan_chat
from gateway.experiments.answer import Answer
from gateway.experiments.bounded import Oversized, read_json
from gateway.experiments.holds import comparison_ceiling_nanos, output_caps
from gateway.experiments.job import ShadowJob, Side
from gateway.experiments.sides import SHADOW, side_of
from gateway.ledger import Budgets, Reservation
from gateway.upstream.calls import Exchange, send
from gateway.upstream.clients import UpstreamPool
from policies import Decision

OVERSIZED = "response_too_large"
"""The error of a candidate's answer cut at ``limits.shadow_max_response_bytes``."""
BYTES_PER_TOKEN = 4
"""The estimate of the output tokens of an answer cut before its usage arrived."""


class ShadowServices(Protocol):
    """What the pipeline lends shadow calls: its transforms (the candidate's compression, retrieval)."""

    def transforms_for(self, runtime: Runtime, record: RequestRecord) -> Transforms: ...


class CandidateCall:
    """The candidate's copy of one request; its record is billed to the experiment (``observers`` are
    told of it once it is over)."""

    def __init__(
        self,
        *,
        runtime: Runtime,
        experiment: ExperimentConfig,
        job: ShadowJob,
        pool: UpstreamPool,
        budgets: Budgets,
        services: ShadowServices,
        observers: tuple[Observer, ...],
        room_nanos: int | None = None,
    ) -> None:
        """``room_nanos``: the most the experiment's budget can still hold today, when a refusal said so
        (``gateway.experiments.holds``): a call held for more is refused without asking Redis."""
        self.runtime, self.experiment, self.job = runtime, experiment, job
        self.room_nanos = room_nanos
        self.oversized = False
        """The candidate's answer passed ``limits.shadow_max_response_bytes`` and was cut."""
        self.pool, self.budgets, self.services, self.observers = pool, budgets, services, observers
        self.record = record = RequestRecord(
            request_id=f"{job.request_id}:{SHADOW}:{job.watch.name}",
            endpoint=SHADOW,
            parent_id=job.request_id,
        )
        record.tenant, record.bill_tenant = job.tenant, bill_tenant(job.watch.name)
        record.requested_model, record.stream = experiment.candidate, job.stream
        self.reservation: Reservation | None = None
        self.action: str | None = None
        """The candidate's own decision (forward, compress, ...): the event's action says ``shadow``."""

    async def run(self) -> Answer:
        """The candidate's answer (empty when it failed: ``side().error`` says why). Raises
        ``BudgetExceeded`` when the experiment's budget cannot hold the call."""
        job, record, runtime = self.job, self.record, self.runtime
        body = job.replay.body(job.body, self.experiment.candidate)
        raw = orjson.dumps(body)
        answer = Answer()
        try:
            plan = await plan_chat(
                runtime,
                tenant=job.tenant.name,
                model=self.experiment.candidate,
                body=body,
                body_len=len(raw),
                headers=job.headers,
                transforms=self.services.transforms_for(runtime, record),
                admit=self._admit,
                front=job.front,
            )
            self._note_plan(plan)
            started = time.perf_counter()
            exchange = await send(
                self.pool,
                (self._route(plan),),
                path=job.path,
                body_for=lambda route: job.replay.content(raw, plan, route, stream=job.stream),
                incoming_headers=job.headers,
                stream=True,  # a whole body too: it is read as it arrives, up to the limit
                attempts_per_route=1,  # a shadow call is never retried
            )
            answer = await self._read(exchange, started)
        except BudgetExceeded:
            raise
        except GatewayError as exc:
            record.status = exc.status_code
            record.error_type = exc.code or exc.error_type
        except Oversized as exc:
            self._cut(exc)
        finally:
            if record.called_model is None:
                await self.budgets.release(self.reservation)
            if record.called_model is not None or record.side_calls:
                notify(self.observers, record)
        return answer

    def _cut(self, exc: Oversized) -> None:
        """The answer was longer than the shadow calls read: billed as an estimate (the prompt as sent, a
        token per ``BYTES_PER_TOKEN`` bytes read), its error ``response_too_large``."""
        record = self.record
        self.oversized = True
        record.error_type = OVERSIZED
        record.error_detail = str(exc)
        record.usage = Usage(
            input_tokens=record.forwarded_tokens or record.prompt_tokens or 0,
            output_tokens=exc.read // BYTES_PER_TOKEN,
            estimated=True,
        )

    async def _admit(self, tokens: int, decision: Decision | None) -> None:
        runtime, experiment = self.runtime, self.experiment
        caps = output_caps(self.job)
        ceiling = ceiling_nanos(runtime, experiment.candidate, decision, tokens, caps)
        ceiling += comparison_ceiling_nanos(runtime, experiment)
        room = self.room_nanos
        if room is not None and ceiling > room:  # a refusal today said it cannot pass: Redis is not asked
            left = usd(max(room, 0), trim=True)
            refusal = BudgetExceeded(f"the experiment's budget has ${left} left today")
            refusal.room_nanos = room
            raise refusal
        self.reservation = await self.budgets.reserve(
            bill_tenant(self.job.watch.name), self.record.request_id, ceiling
        )

    def _route(self, plan: Plan) -> Route:
        """The candidate's own route (a reroute's target when its policy reroutes), never its fallbacks."""
        decided = plan.decision.model if plan.decision is not None else self.experiment.candidate
        return self.runtime.candidates(decided)[0]

    def _note_plan(self, plan: Plan) -> None:
        record, decision = self.record, plan.decision
        if decision is not None:
            record.policy, record.band, record.reason = decision.policy, decision.band.value, decision.reason
            self.action = decision.action.value
        record.action = SHADOW
        record.prompt_tokens = plan.received_tokens
        record.forwarded_tokens = plan.forwarded_tokens

    async def _read(self, exchange: Exchange, started: float) -> Answer:
        record = self.record
        record.called_model = exchange.route.public_model
        record.provider = exchange.route.provider_name
        record.status = exchange.response.status_code
        record.attempts = exchange.attempts
        replay = self.job.replay
        limit = self.runtime.config.limits.shadow_max_response_bytes
        if not self.job.stream:
            data, size = await read_json(exchange.response, limit)
            record.upstream_seconds = time.perf_counter() - started
            if not isinstance(data, dict):
                record.status, record.error_type = 502, "upstream_invalid_response"
                record.error_detail = f"a body of {size} bytes that is not a JSON object"
                return Answer()
            reading = replay.read(data)
            record.usage = reading.usage
            record.finish_reason = reading.answer.finish_reason
            return reading.answer
        reading = await replay.read_stream(exchange.response, started=started, limit=limit)
        if reading.error_type is not None:
            record.error_type = reading.error_type
        record.upstream_seconds = time.perf_counter() - started
        record.first_token_seconds = reading.first_token_seconds
        record.usage = reading.usage
        record.finish_reason = reading.answer.finish_reason
        return reading.answer

    def side(self) -> Side:
        """The candidate's side of the pair: its record's, with its own decision as the action."""
        return replace(side_of(self.record), action=self.action)
