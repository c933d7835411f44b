"""The candidate's copy of one sampled request: planned for the candidate (its bands, policies and
transforms), held against the experiment's budget, sent once, read to the end or to
``limits.shadow_max_response_bytes`` (``gateway.experiments.bounded``)."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any, Protocol

import orjson

from gateway.admission import ceiling_nanos
from gateway.errors import BudgetExceeded, GatewayError
from gateway.experiments.answer import Answer, answer_of, messages_answer, streamed_chat_answer
from gateway.experiments.bounded import Oversized, drain, read_json
from gateway.experiments.config import ExperimentConfig, bill_tenant
from gateway.experiments.holds import comparison_ceiling_nanos, output_caps
from gateway.experiments.job import ShadowJob, Side
from gateway.experiments.sides import SHADOW, side_of
from gateway.ledger import Budgets, Reservation
from gateway.messages.stream import MessagesStreamReader
from gateway.messages.thinking import for_another_model
from gateway.messages.usage import usage_from_anthropic
from gateway.money import usd
from gateway.planning import Plan, Transforms, plan_chat, planned_body
from gateway.record import Observer, RequestRecord, notify
from gateway.responses.stream import ResponsesStreamReader
from gateway.runtime import Route, Runtime
from gateway.streaming import ChatStreamReader
from gateway.types import Usage
from gateway.upstream import Exchange, UpstreamPool, send
from gateway.usage import usage_from_openai
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
        body = _candidate_body(job, self.experiment.candidate)
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
                body_for=lambda route: _body_for(job, raw, plan, route),
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
        anthropic = self.job.endpoint == "messages"
        limit = self.runtime.config.limits.shadow_max_response_bytes
        if not self.job.stream:
            data, size = await read_json(exchange.response, limit)
            record.upstream_seconds = time.perf_counter() - started
            if not isinstance(data, dict):
                record.status, record.error_type = 502, "upstream_invalid_response"
                record.error_detail = f"a body of {size} bytes that is not a JSON object"
                return Answer()
            record.usage = _usage(data.get("usage"), anthropic=anthropic)
            found = answer_of(data)
            record.finish_reason = found.finish_reason
            return found
        if anthropic:
            reader = MessagesStreamReader(started=started, collect=True)
            blocks = await drain(exchange.response, reader, limit)
            found = messages_answer(
                [blocks.blocks[index] for index in sorted(blocks.blocks)], blocks.stop_reason
            )
            usage, first = blocks.usage, blocks.first_token_seconds
            if blocks.error is not None:
                record.error_type = str(blocks.error.get("type") or "api_error")
        elif self.job.endpoint == "chat":
            chat = ChatStreamReader(strip_usage_chunk=False, started=started, collect_calls=True)
            await drain(exchange.response, chat, limit)
            found = streamed_chat_answer(chat.answer_text, chat.calls, chat.finish_reason)
            usage, first = chat.usage, chat.first_token_seconds
        else:
            events = await drain(exchange.response, ResponsesStreamReader(started=started), limit)
            found = answer_of(events.response)
            usage, first = events.usage, events.first_token_seconds
        record.upstream_seconds = time.perf_counter() - started
        record.first_token_seconds = first
        record.usage = _usage(usage, anthropic=anthropic)
        record.finish_reason = found.finish_reason
        return found

    def side(self) -> Side:
        """The candidate's side of the pair: its record's, with its own decision as the action."""
        return replace(side_of(self.record), action=self.action)


def _body_for(job: ShadowJob, raw: bytes, plan: Plan, route: Route) -> bytes:
    """The candidate's bytes: chat streams ask for their usage; a Messages copy goes without the thinking
    blocks only the primary can verify."""
    if job.endpoint == "messages":
        changed, dropped = for_another_model(plan.body, route.upstream_model)
        return orjson.dumps(changed) if dropped else planned_body(raw, plan, route)
    return planned_body(raw, plan, route, add_usage=job.stream and job.endpoint == "chat")


def _usage(usage: object, *, anthropic: bool) -> Usage | None:
    if anthropic:
        return usage_from_anthropic(usage) if isinstance(usage, dict) else None
    return usage_from_openai(usage if isinstance(usage, dict) else None)


def _candidate_body(job: ShadowJob, candidate: str) -> dict[str, Any]:
    """The request as the candidate gets it: its model, and nothing the provider would keep or run on."""
    body = {**job.body, "model": candidate}
    if job.endpoint == "responses":
        body["store"] = False
        body.pop("background", None)
    else:
        body.pop("store", None)
    return body
