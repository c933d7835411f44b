"""Shadow calls: a sampled request sent again to an experiment's candidate once the primary's answer
has been handed over, compared, and billed to the experiment.

The candidate's copy goes through the same counting, bands and transforms as the primary's did, for the
candidate's own cliff and window. It is made once (no retries, no fallbacks), held against the
experiment's daily budget (``gateway.ledger.Budgets`` on the ledger tenant ``experiment:<name>``), and
recorded as a cost event of kind ``shadow`` on that tenant, never the caller's. Shadow calls are bounded
per experiment and per process and shed, never queued: when no slot is free, or the process is busy with
client requests (using most of its core, ``gateway.experiments.load``, or running many tasks), the sample is
dropped and counted as ``shed``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import orjson
import structlog

from gateway.admission import ceiling_nanos
from gateway.errors import BudgetExceeded, GatewayError
from gateway.experiments.agreement import Agreement, agreement, cosine, uses_tools
from gateway.experiments.answer import Answer, answer_of, messages_answer, streamed_chat_answer
from gateway.experiments.config import ExperimentConfig, bill_tenant
from gateway.experiments.judge import JUDGE_MAX_TOKENS, judge_messages, parse_grade
from gateway.experiments.load import ProcessLoad
from gateway.experiments.matching import Watch
from gateway.experiments.tally import Tally
from gateway.ledger import Budgets, Reservation
from gateway.ledger.period import MS_PER_DAY
from gateway.messages.stream import MessagesStreamReader
from gateway.messages.thinking import for_another_model
from gateway.messages.usage import usage_from_anthropic
from gateway.metering import SHADOW_CALL, max_cost_nanos
from gateway.planning import CHAT, Front, Plan, Transforms, latest_instruction, plan_chat, planned_body
from gateway.record import Observer, RequestRecord, notify
from gateway.reload import ConfigStore
from gateway.responses.stream import ResponsesStreamReader
from gateway.runtime import Route, Runtime
from gateway.sampling.buckets import bucket_index, buckets_for
from gateway.sampling.decide import sample_fraction
from gateway.streaming import ChatStreamReader
from gateway.transforms import UpstreamCompleter, UpstreamEmbedder
from gateway.types import Tenant, Usage
from gateway.upstream import Exchange, UpstreamPool, send
from gateway.usage import usage_from_openai
from policies import Decision

log = structlog.get_logger("gateway.experiments")

SHADOW = SHADOW_CALL
"""The endpoint of a shadow call's record and the kind and action of its cost event."""
PATHS = {"chat": "/chat/completions", "responses": "/responses", "messages": "/messages"}


@dataclass(slots=True)
class ShadowJob:
    """A sampled request, kept until the primary's answer is over (what the candidate needs of it)."""

    watch: Watch
    request_id: str
    tenant: Tenant
    endpoint: str
    body: dict[str, Any]
    headers: dict[str, str]
    stream: bool
    tokens: int
    front: Front = CHAT
    path: str = PATHS["chat"]
    """Upstream, with the client's query string (Messages' ``?beta=true``)."""


@dataclass(slots=True)
class Side:
    """One model's part of a pair, as the report reads it (``gateway.experiments.store``)."""

    model: str
    latency_ms: float | None = None
    ttft_ms: float | None = None
    output_tokens: int | None = None
    finish_reason: str | None = None
    error: str | None = None
    status: int = 0
    cost_nanos: int = 0
    action: str | None = None
    tokens_sent: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "latency_ms": None if self.latency_ms is None else round(self.latency_ms, 2),
            "ttft_ms": None if self.ttft_ms is None else round(self.ttft_ms, 2),
            "output_tokens": self.output_tokens,
            "finish_reason": self.finish_reason,
            "error": self.error,
            "status": self.status,
            "cost_nanos": self.cost_nanos,
            "action": self.action,
            "tokens_sent": self.tokens_sent,
        }


def side_of(record: RequestRecord) -> Side:
    """The primary's (or a split arm's) side, from its finished record."""
    upstream = record.upstream_seconds
    failed = record.status >= 400 or record.error_type is not None
    return Side(
        model=record.called_model or record.requested_model or "",
        latency_ms=None if upstream is None else upstream * 1000,
        ttft_ms=None if record.first_token_seconds is None else record.first_token_seconds * 1000,
        output_tokens=record.usage.output_tokens if record.usage is not None else None,
        finish_reason=record.finish_reason,
        error=(record.error_type or "upstream_error") if failed else None,
        status=record.status,
        cost_nanos=record.cost_nanos or 0,
        action=record.action,
        tokens_sent=record.forwarded_tokens,
    )


class ShadowServices(Protocol):
    """What the pipeline lends shadow calls: its transforms (the candidate's compression, retrieval)."""

    def transforms_for(self, runtime: Runtime, record: RequestRecord) -> Transforms: ...


PairSink = Callable[[str, dict[str, Any]], None]
"""``sink(experiment, pair)``: store one pair (in the background)."""


@dataclass(slots=True)
class _Stopped:
    until_ms: int
    budget: object


@dataclass(slots=True)
class ShadowRunner:
    """Launches, bounds and runs shadow calls; an ``Observer`` of the finished primary requests."""

    store: ConfigStore
    pool: UpstreamPool
    budgets: Budgets
    services: ShadowServices
    observers: tuple[Observer, ...]
    tally: Tally
    pairs: PairSink
    clock: Callable[[], float] = time.time
    running: dict[str, int] = field(default_factory=dict)
    tasks: set[asyncio.Task[None]] = field(default_factory=set)
    load: ProcessLoad = field(default_factory=ProcessLoad)
    stopped: dict[str, _Stopped] = field(default_factory=dict)
    """Experiments whose budget is spent, until the end of the UTC day (or until their budget changes)."""

    def launch(self, job: ShadowJob, primary: RequestRecord) -> None:
        """Start the candidate's call for ``job`` now, or shed it."""
        name = job.watch.name
        now_ms = int(self.clock() * 1000)
        runtime = self.store.current
        experiment = runtime.config.experiments.get(name)
        if experiment is None or not experiment.enabled or experiment.mode != "shadow":
            return
        if self._over_budget(name, experiment, now_ms):
            self.tally.add(name, now_ms, "over_budget")
            return
        limits = runtime.config.limits
        in_flight = sum(self.running.values())
        self.load.watch()
        if (
            self.running.get(name, 0) >= experiment.max_concurrency
            or in_flight >= limits.shadow_calls
            or self.load.share > limits.shadow_shed_above_cpu
            or len(asyncio.all_tasks()) > limits.shadow_shed_above_requests
        ):
            self.tally.add(name, now_ms, "shed")
            return
        self.running[name] = self.running.get(name, 0) + 1
        task = asyncio.get_running_loop().create_task(
            self._guarded(job, side_of(primary), primary.answer or Answer()), name="shadow_call"
        )
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    def _over_budget(self, name: str, experiment: ExperimentConfig, now_ms: int) -> bool:
        stopped = self.stopped.get(name)
        if stopped is None:
            return False
        if now_ms < stopped.until_ms and stopped.budget == experiment.budget_usd_per_day:
            return True
        del self.stopped[name]
        return False

    async def _guarded(self, job: ShadowJob, primary: Side, answer: Answer) -> None:
        name = job.watch.name
        try:
            await self.run(job, primary, answer)
        except Exception:
            log.exception("shadow_failed", experiment=name, request_id=job.request_id)
        finally:
            self.running[name] -= 1

    async def run(self, job: ShadowJob, primary: Side, primary_answer: Answer) -> None:
        runtime = self.store.current
        name = job.watch.name
        experiment = runtime.config.experiments.get(name)
        if experiment is None:
            return
        now_ms = int(self.clock() * 1000)
        record = RequestRecord(request_id=f"{job.request_id}:{SHADOW}:{name}", endpoint=SHADOW)
        record.parent_id = job.request_id
        record.tenant = job.tenant
        record.bill_tenant = bill_tenant(name)
        record.requested_model = experiment.candidate
        record.stream = job.stream
        call = _CandidateCall(self, runtime, experiment, job, record)
        try:
            candidate_answer = await call.run()
        except BudgetExceeded:
            self.stopped[name] = _Stopped(
                (now_ms // MS_PER_DAY + 1) * MS_PER_DAY, experiment.budget_usd_per_day
            )
            self.tally.add(name, now_ms, "over_budget")
            log.info("shadow_budget_spent", experiment=name)
            return
        candidate = call.side()
        if candidate.error is not None:
            self.tally.add(name, now_ms, "failed")
        else:
            self.tally.add(name, now_ms, "shadowed")
        comparing = RequestRecord(request_id=f"{record.request_id}:compare", endpoint=SHADOW)
        comparing.parent_id = job.request_id
        comparing.tenant, comparing.bill_tenant = job.tenant, record.bill_tenant
        agreed: Agreement | None = None
        judged: dict[str, Any] | None = None
        if candidate.error is None and primary.error is None:
            agreed = await self._agreement(runtime, experiment, comparing, primary_answer, candidate_answer)
            judged = await self._judge(runtime, experiment, comparing, job, primary_answer, candidate_answer)
        if comparing.side_calls:
            notify(self.observers, comparing)
        self.pairs(
            name,
            {
                "v": 1,
                "id": job.request_id,
                "t": now_ms,
                "tenant": job.tenant.name,
                "mode": "shadow",
                "tokens": job.tokens,
                "primary": primary.to_dict(),
                "candidate": candidate.to_dict(),
                "agreement": agreed.to_dict() if agreed is not None else None,
                "judge": judged,
                "tools": bool(job.body.get("tools")),
            },
        )

    async def _agreement(
        self,
        runtime: Runtime,
        experiment: ExperimentConfig,
        record: RequestRecord,
        primary: Answer,
        candidate: Answer,
    ) -> Agreement:
        similarity = None
        model = experiment.embedding_model
        if model is not None and not uses_tools(primary, candidate) and primary.text and candidate.text:
            try:
                vectors = await UpstreamEmbedder(self.pool, runtime, model, record).embed(
                    [primary.text, candidate.text]
                )
                similarity = cosine(vectors[0], vectors[1])
            except (GatewayError, KeyError, TypeError, ValueError, IndexError) as exc:
                log.warning("shadow_embedding_failed", model=model, error=str(exc))
        return agreement(primary, candidate, similarity=similarity)

    async def _judge(
        self,
        runtime: Runtime,
        experiment: ExperimentConfig,
        record: RequestRecord,
        job: ShadowJob,
        primary: Answer,
        candidate: Answer,
    ) -> dict[str, Any] | None:
        judge = experiment.judge
        if judge is None or not _sampled_share(job.request_id, judge.sample_rate):
            return None
        question = latest_instruction(job.front.messages(job.body)) or ""
        try:
            text = await UpstreamCompleter(self.pool, runtime, judge.model, record, kind="judge").complete(
                judge_messages(judge.rubric, question, primary, candidate), max_tokens=JUDGE_MAX_TOKENS
            )
        except (GatewayError, RuntimeError) as exc:
            log.warning("shadow_judge_failed", model=judge.model, error=str(exc))
            return None
        grade = parse_grade(text)
        return None if grade is None else {"score": grade, "model": judge.model}

    async def aclose(self, timeout: float = 5.0) -> None:
        """Let running shadow calls end (they bill the experiment), then cancel what is left."""
        if self.tasks:
            _, pending = await asyncio.wait(set(self.tasks), timeout=timeout)
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.wait(pending)
        await self.load.aclose()
        await self.tally.aclose()


def _sampled_share(request_id: str, rate: float) -> bool:
    return rate > 0 and sample_fraction(f"judge\x00{request_id}") < rate


class _CandidateCall:
    """The candidate's copy of one request: planned, held, sent once, read."""

    def __init__(
        self,
        runner: ShadowRunner,
        runtime: Runtime,
        experiment: ExperimentConfig,
        job: ShadowJob,
        record: RequestRecord,
    ) -> None:
        self.runner, self.runtime, self.experiment, self.job, self.record = (
            runner,
            runtime,
            experiment,
            job,
            record,
        )
        self.reservation: Reservation | None = None
        self.action: str | None = None
        """The candidate's own decision (forward, compress, ...): the event's action says ``shadow``."""
        self.latency: float | None = None
        self.error: str | None = None

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
                transforms=self.runner.services.transforms_for(runtime, record),
                admit=self._admit,
                front=job.front,
            )
            self._note_plan(plan)
            started = time.perf_counter()
            exchange = await send(
                self.runner.pool,
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
            record.error_type = self.error = exc.code or exc.error_type
        finally:
            if record.called_model is None:
                await self.runner.budgets.release(self.reservation)
            if record.called_model is not None or record.side_calls:
                notify(self.runner.observers, record)
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
        self.reservation = await self.runner.budgets.reserve(
            bill_tenant(self.job.watch.name), self.record.request_id, ceiling
        )

    def _comparison_ceiling(self) -> int:
        """The most the comparison's calls can cost: the judge reads both answers (at most the
        candidate's output cap each, plus the question excerpt), the embeddings both texts."""
        experiment, models = self.experiment, self.runtime.config.models
        total = 0
        if experiment.judge is not None:
            total += max_cost_nanos(
                models.get(experiment.judge.model), 8_000, {"max_tokens": JUDGE_MAX_TOKENS}
            )
        if experiment.embedding_model is not None:
            total += max_cost_nanos(models.get(experiment.embedding_model), 8_000, {}, output=False)
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
            self.latency = record.upstream_seconds = time.perf_counter() - started
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
                record.error_type = self.error = str(blocks.error.get("type") or "api_error")
        elif self.job.endpoint == "chat":
            reader = ChatStreamReader(strip_usage_chunk=False, started=started, collect_calls=True)
            await _drained(exchange, reader)
            found = streamed_chat_answer(reader.answer_text, reader.calls, reader.finish_reason)
            usage, first = reader.usage, reader.first_token_seconds
        else:
            events = await _drained(exchange, ResponsesStreamReader(started=started))
            found = answer_of(events.response)
            usage, first = events.usage, events.first_token_seconds
        self.latency = record.upstream_seconds = time.perf_counter() - started
        record.first_token_seconds = first
        record.usage = _usage(usage, anthropic=anthropic)
        record.finish_reason = found.finish_reason
        return found

    def side(self) -> Side:
        record = self.record
        return Side(
            model=record.called_model or self.experiment.candidate,
            latency_ms=None if self.latency is None else self.latency * 1000,
            ttft_ms=None if record.first_token_seconds is None else record.first_token_seconds * 1000,
            output_tokens=record.usage.output_tokens if record.usage is not None else None,
            finish_reason=record.finish_reason,
            error=self.error,
            status=record.status,
            cost_nanos=record.cost_nanos or 0,
            action=self.action,
            tokens_sent=record.forwarded_tokens,
        )


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


def bucket_low(tokens: int, edges: tuple[int, ...]) -> int:
    return buckets_for(edges)[bucket_index(tokens, edges)].low
