"""Shadow calls: a sampled request sent again to an experiment's candidate once the primary's answer
has been handed over, compared, and billed to the experiment.

The candidate's copy goes through the same counting, bands and transforms as the primary's did, for the
candidate's own cliff and window. It is made once (no retries, no fallbacks), held against the
experiment's daily budget (``gateway.ledger.Budgets`` on the ledger tenant ``experiment:<name>``; a
refused hold skips that call only, ``gateway.experiments.holds``), read up to a bound
(``gateway.experiments.bounded``), and recorded as a cost event of kind ``shadow`` on that tenant, never
the caller's. Shadow calls are bounded per experiment and per process and shed, never queued: when no
slot is free, or the process is busy with client requests (using most of its core,
``gateway.experiments.load``, or running many tasks), the sample is dropped and counted as ``shed``, and
by its reason (``gateway.experiments.shed``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import anyio
import structlog

from gateway.base.errors import BudgetExceeded, GatewayError
from gateway.base.money import usd
from gateway.base.record import Observer, RequestRecord, notify
from gateway.config.reload import ConfigStore
from gateway.config.runtime import Runtime
from gateway.config.schema.experiments import ExperimentConfig
from gateway.core.planning import latest_instruction
from gateway.core.transforms import UpstreamEmbedder, cheap_completer
from gateway.experiments.agreement import Agreement, agreement, cosine, uses_tools
from gateway.experiments.answer import Answer
from gateway.experiments.candidate import CandidateCall, ShadowServices
from gateway.experiments.holds import Rooms, least_hold_nanos
from gateway.experiments.job import ShadowJob, Side
from gateway.experiments.judge import JUDGE_MAX_TOKENS, judge_messages, parse_grade
from gateway.experiments.load import ProcessLoad
from gateway.experiments.notes import ANSWER
from gateway.experiments.shed import shed_reason
from gateway.experiments.sides import SHADOW, side_of
from gateway.experiments.tally import Tally
from gateway.ledger import Budgets
from gateway.sampling.decide import is_sampled
from gateway.upstream.clients import UpstreamPool

log = structlog.get_logger("gateway.experiments")


INLINE_AGREEMENT_CHARS = 64 * 1024
"""Answers longer than this (together) are compared in a worker thread, off the event loop."""

PairSink = Callable[[str, dict[str, Any]], None]
"""``sink(experiment, pair)``: store one pair (in the background)."""


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
    rooms: Rooms = field(default_factory=Rooms)
    """What each experiment's budget can still hold today, as its last refusal said."""

    def launch(self, job: ShadowJob, primary: RequestRecord) -> None:
        """Start the candidate's call for ``job`` now, or shed it."""
        name = job.watch.name
        now_ms = int(self.clock() * 1000)
        runtime = self.store.current
        experiment = runtime.config.experiments.get(name)
        if experiment is None or not experiment.enabled or experiment.mode != "shadow":
            return
        room = self.rooms.of(name, experiment, now_ms)
        if room is not None and least_hold_nanos(runtime, experiment, job) > room:
            self.tally.add(name, now_ms, "over_budget")  # cannot fit today, whatever its prompt
            return
        self.load.watch()
        reason = shed_reason(
            running=self.running.get(name, 0),
            max_concurrency=experiment.max_concurrency,
            in_flight=sum(self.running.values()),
            cpu_share=self.load.share,
            tasks=len(asyncio.all_tasks()),
            limits=runtime.config.limits,
        )
        if reason is not None:
            self.tally.add(name, now_ms, "shed")
            self.tally.add(name, now_ms, f"shed_{reason}")
            return
        self.running[name] = self.running.get(name, 0) + 1
        task = asyncio.get_running_loop().create_task(
            self._guarded(job, side_of(primary), primary.note(ANSWER) or Answer()), name="shadow_call"
        )
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

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
        call = CandidateCall(
            runtime=runtime,
            experiment=experiment,
            job=job,
            pool=self.pool,
            budgets=self.budgets,
            services=self.services,
            observers=self.observers,
            room_nanos=self.rooms.of(name, experiment, now_ms),
        )
        try:
            candidate_answer = await call.run()
        except BudgetExceeded as exc:
            self._refused(name, experiment, exc, now_ms)
            return
        candidate = call.side()
        if candidate.error is not None:
            self.tally.add(name, now_ms, "failed")
        else:
            self.tally.add(name, now_ms, "shadowed")
        if call.oversized:
            self.tally.add(name, now_ms, "oversized")
        comparing = RequestRecord(
            request_id=f"{call.record.request_id}:compare", endpoint=SHADOW, parent_id=job.request_id
        )
        comparing.tenant, comparing.bill_tenant = job.tenant, call.record.bill_tenant
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

    def _refused(self, name: str, experiment: ExperimentConfig, exc: BudgetExceeded, now_ms: int) -> None:
        """This call only is skipped; what the refusal says of the day's room skips, without asking Redis,
        the later calls that cannot fit (``gateway.experiments.holds``)."""
        self.tally.add(name, now_ms, "over_budget")
        if exc.room_nanos is None:
            return
        before = self.rooms.of(name, experiment, now_ms)
        room = self.rooms.refused(name, experiment, exc.room_nanos, now_ms)
        if before is None or room < before:
            log.info("shadow_budget_refused", experiment=name, left_today_usd=usd(max(room, 0), trim=True))

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
        if len(primary.text) + len(candidate.text) > INLINE_AGREEMENT_CHARS:
            compare = partial(agreement, primary, candidate, similarity=similarity)
            return await anyio.to_thread.run_sync(compare)
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
        if judge is None or not is_sampled(f"judge\x00{job.request_id}", judge.sample_rate):
            return None
        question = latest_instruction(job.front.messages(job.body)) or ""
        try:
            text = await cheap_completer(self.pool, runtime, judge.model, record, kind="judge").complete(
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
