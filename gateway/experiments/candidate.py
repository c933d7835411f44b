"""The candidate's copy of one sampled request: planned for the candidate (its bands, policies and
transforms), held against the experiment's budget, sent once, read to the end."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any, Protocol, TypeVar

import orjson

from gateway.admission import ceiling_nanos
from gateway.errors import BudgetExceeded, GatewayError
from gateway.experiments.answer import Answer, answer_of, messages_answer, streamed_chat_answer
from gateway.experiments.config import ExperimentConfig, bill_tenant
from gateway.experiments.job import SHADOW, ShadowJob, Side, side_of
from gateway.experiments.judge import JUDGE_MAX_TOKENS
from gateway.ledger import Budgets, Reservation
from gateway.messages.stream import MessagesStreamReader
from gateway.messages.thinking import for_another_model
from gateway.messages.usage import usage_from_anthropic
from gateway.metering import max_cost_nanos
from gateway.planning import Plan, Transforms, plan_chat, planned_body
from gateway.record import Observer, RequestRecord, notify
from gateway.responses.stream import ResponsesStreamReader
from gateway.runtime import Route, Runtime
from gateway.streaming import ChatStreamReader
from gateway.types import Usage
from gateway.upstream import Exchange, UpstreamPool, send
from gateway.usage import usage_from_openai
from policies import Decision

COMPARED_TOKENS = 8_000
"""The input a comparison call is held for: the judge's excerpts of the question and both answers, or
the two answers embedded."""


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
    ) -> None:
        self.runtime, self.experiment, self.job = runtime, experiment, job
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
                stream=job.stream,
                expect_json=not job.stream,
                attempts_per_route=1,  # a shadow call is never retried
            )
            answer = await self._read(exchange, started)
        except BudgetExceeded:
            raise
        except GatewayError as exc:
            record.status = exc.status_code
            record.error_type = exc.code or exc.error_type
        finally:
            if record.called_model is None:
                await self.budgets.release(self.reservation)
            if record.called_model is not None or record.side_calls:
                notify(self.observers, record)
        return answer

    async def _admit(self, tokens: int, decision: Decision | None) -> None:
        job = self.job
        caps = (
            job.body
            if job.endpoint == "chat"
            else {"max_completion_tokens": job.body.get("max_output_tokens")}
        )
        ceiling = ceiling_nanos(self.runtime, self.experiment.candidate, decision, tokens, caps)
        ceiling += self._comparison_ceiling()
        self.reservation = await self.budgets.reserve(
            bill_tenant(self.job.watch.name), self.record.request_id, ceiling
        )

    def _comparison_ceiling(self) -> int:
        """The most the comparison's calls can cost: the judge reads both answers (at most the
        candidate's output cap each, plus the question excerpt), the embeddings both texts."""
        experiment, models = self.experiment, self.runtime.config.models
        total = 0
        if experiment.judge is not None:
            judge = models.get(experiment.judge.model)
            total += max_cost_nanos(judge, COMPARED_TOKENS, {"max_tokens": JUDGE_MAX_TOKENS})
        if experiment.embedding_model is not None:
            embedder = models.get(experiment.embedding_model)
            total += max_cost_nanos(embedder, COMPARED_TOKENS, {}, output=False)
        return total

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
        if not self.job.stream:
            record.upstream_seconds = time.perf_counter() - started
            data = exchange.data or {}
            record.usage = _usage(data.get("usage"), anthropic=anthropic)
            found = answer_of(data)
            record.finish_reason = found.finish_reason
            return found
        if anthropic:
            blocks = await _drained(exchange, MessagesStreamReader(started=started, collect=True))
            found = messages_answer(
                [blocks.blocks[index] for index in sorted(blocks.blocks)], blocks.stop_reason
            )
            usage, first = blocks.usage, blocks.first_token_seconds
            if blocks.error is not None:
                record.error_type = str(blocks.error.get("type") or "api_error")
        elif self.job.endpoint == "chat":
            reader = ChatStreamReader(strip_usage_chunk=False, started=started, collect_calls=True)
            await _drained(exchange, reader)
            found = streamed_chat_answer(reader.answer_text, reader.calls, reader.finish_reason)
            usage, first = reader.usage, reader.first_token_seconds
        else:
            events = await _drained(exchange, ResponsesStreamReader(started=started))
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


class _Reader(Protocol):
    def feed(self, chunk: bytes) -> object: ...

    def flush(self) -> object: ...


_R = TypeVar("_R", bound=_Reader)


async def _drained(exchange: Exchange, reader: _R) -> _R:
    """``reader`` once it has read the whole stream (the upstream call closed, however it ended)."""
    try:
        async for chunk in exchange.response.aiter_raw():
            reader.feed(chunk)
        reader.flush()
    finally:
        await exchange.response.aclose()
    return reader


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
