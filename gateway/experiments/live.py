"""The pipeline's view of experiments: the split routing step before counting, the watch after the
primary's answer, and the observer that tallies matching traffic and launches shadow calls.

A request whose model no experiment watches pays a dict lookup in each step and nothing else.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

import redis.asyncio as aioredis
import structlog

from gateway.base.background import Background
from gateway.base.record import Observer, RequestRecord
from gateway.config.experiments import Watch, matches, sampled
from gateway.config.reload import ConfigStore
from gateway.config.runtime import Runtime
from gateway.config.schema.experiments import bill_tenant
from gateway.core.front import Front
from gateway.experiments.candidate import ShadowServices
from gateway.experiments.job import PATHS, ShadowJob
from gateway.experiments.notes import NEW_CONVERSATION, SHADOW_JOBS
from gateway.experiments.replay import Replay
from gateway.experiments.shadow import ShadowRunner
from gateway.experiments.sides import SHADOW, side_of
from gateway.experiments.split import (
    PRIMARY,
    Arm,
    Assignment,
    NewConversation,
    assign,
    conversation_key,
    remember,
)
from gateway.experiments.store import ExperimentKeys, add_pairs, add_traffic
from gateway.experiments.tally import Tally
from gateway.experiments.trouble import REDIS_FAILURES, ErrorCount, RedisTrouble
from gateway.ledger import BudgetConfig, Budgets
from gateway.tokens.buckets import bucket_low
from gateway.upstream.clients import UpstreamPool

log = structlog.get_logger("gateway.experiments")
EXPERIMENT_HEADER = "x-gateway-experiment"


class Experiments:
    def __init__(
        self,
        *,
        store: ConfigStore,
        pool: UpstreamPool,
        redis: aioredis.Redis,
        observers: tuple[Observer, ...],
        background: Background,
        services: ShadowServices,
        clock: Callable[[], float] = time.time,
        count_error: ErrorCount | None = None,
    ) -> None:
        """``count_error``: counts a Redis error of experiments in the metrics."""
        self.store = store
        self.redis = redis
        self.keys = ExperimentKeys(store.current.config.ledger.key_prefix)
        self.background = background
        self.clock = clock
        self.trouble = RedisTrouble(count_error)
        self.tally = Tally(
            lambda name, day, counts: add_traffic(redis, self.keys, name, day, counts),
            lambda pairs: add_pairs(redis, self.keys, pairs),
            trouble=self.trouble,
        )
        self.writes: set[asyncio.Task[None]] = set()
        """New conversations' arms being written."""
        self.runner = ShadowRunner(
            store=store,
            pool=pool,
            budgets=Budgets(redis, budget_of=self.budget_of, config=store.current.config.ledger),
            services=services,
            observers=observers,
            tally=self.tally,
            pairs=self.store_pair,
            clock=clock,
        )

    def budget_of(self, tenant: str) -> BudgetConfig | None:
        """The daily budget of an experiment's ledger tenant (``experiment:<name>``)."""
        for name, experiment in self.store.current.config.experiments.items():
            if bill_tenant(name) == tenant and experiment.budget_usd_per_day is not None:
                return BudgetConfig(daily_usd=experiment.budget_usd_per_day, on_redis_down="closed")
        return None

    # --- split: before counting ------------------------------------------------------------------

    async def route(
        self,
        runtime: Runtime,
        record: RequestRecord,
        body: Mapping[str, Any],
        headers: Mapping[str, str],
        messages: Callable[[], list[Any]],
        *,
        chained_model: str | None = None,
        api: str = "openai",
    ) -> str | None:
        """The model a split sends this request to instead of the one asked for (None: the one asked
        for). ``chained_model``: the model that produced the stored response this turn continues."""
        model, tenant = record.requested_model, record.tenant
        watches = runtime.experiments.splits.get(model or "")
        if not watches or tenant is None or record.probe:
            return None
        index = runtime.experiments
        for watch in watches:
            if not matches(watch, tenant=tenant.name, headers=headers, tokens=None, index=index, api=api):
                continue
            now_ms = int(self.clock() * 1000)
            if chained_model is not None:
                on_candidate = chained_model == watch.config.candidate and not watch.config.force_back
                arm: Arm = "candidate" if on_candidate else "primary"
            else:
                conversation = conversation_key(tenant.name, body, messages())
                assigned = await self._assign(runtime, watch, conversation, now_ms)
                arm = assigned.arm
                record.put(NEW_CONVERSATION, assigned.new)
                if assigned.full:
                    self.tally.add(watch.name, now_ms, "split_full")
            record.experiment = f"{watch.name}; arm={arm}"
            record.watched = (*record.watched, watch.name)
            record.offered_tools = bool(body.get("tools"))
            self.tally.add(watch.name, now_ms, f"split_{arm}")
            return watch.config.candidate if arm == "candidate" else None
        return None

    async def _assign(self, runtime: Runtime, watch: Watch, conversation: str, now_ms: int) -> Assignment:
        """The conversation's arm; the primary when Redis cannot tell (unreachable, or an error: logged and
        counted, ``gateway.experiments.trouble``)."""
        cap = runtime.config.limits.split_conversations_per_experiment
        try:
            return await assign(self.redis, self.keys, watch, conversation, cap=cap, now_ms=now_ms)
        except REDIS_FAILURES as exc:
            self.trouble.note(watch.name, "assign", exc, fallback="primary")
            return PRIMARY

    def admitted(self, record: RequestRecord) -> None:
        """The request passed its budget: remember its new conversation's arm (in the background: the
        request does not wait for it)."""
        new = record.note(NEW_CONVERSATION)
        record.put(NEW_CONVERSATION, None)
        if new is None:
            return
        task = asyncio.get_running_loop().create_task(self._remember(new), name="split_remember")
        self.writes.add(task)
        task.add_done_callback(self.writes.discard)

    async def _remember(self, new: NewConversation) -> None:
        try:
            await remember(self.redis, self.keys, new, now_ms=int(self.clock() * 1000))
        except REDIS_FAILURES as exc:
            self.trouble.note(new.experiment, "remember", exc, fallback="not remembered (decided again)")

    # --- shadow: once the primary has answered ---------------------------------------------------

    def watch(
        self,
        runtime: Runtime,
        record: RequestRecord,
        body: dict[str, Any],
        headers: Mapping[str, str],
        front: Front,
        replay: Replay,
        *,
        path: str | None = None,
        api: str = "openai",
    ) -> None:
        """Mark the request for the shadow experiments it matches, and keep what a sampled one's
        candidate call needs. Called once the primary has answered, before the answer is relayed.
        ``front`` and ``replay``: how the request's front shows its prompt and how a copy is sent in its
        API; ``path``: the upstream path the copy goes to (default: the endpoint's), ``api``: the
        front's."""
        watches = runtime.experiments.shadows.get(record.requested_model or "")
        tenant = record.tenant
        if not watches or tenant is None or record.probe or record.experiment is not None:
            return
        tokens = record.prompt_tokens
        if tokens is None:
            return
        index = runtime.experiments
        for watch in watches:
            check = partial(
                matches, watch, tenant=tenant.name, headers=headers, tokens=tokens, index=index, api=api
            )
            if not check():
                if check(opted_out=True):
                    self.tally.add(watch.name, int(self.clock() * 1000), "excluded")
                continue
            record.watched = (*record.watched, watch.name)
            if sampled(watch, record.request_id):
                job = ShadowJob(
                    watch=watch,
                    request_id=record.request_id,
                    tenant=tenant,
                    endpoint=record.endpoint,
                    body=body,
                    headers=dict(headers),
                    stream=record.stream,
                    tokens=tokens,
                    replay=replay,
                    front=front,
                    path=path or PATHS[record.endpoint],
                )
                record.put(SHADOW_JOBS, (*(record.note(SHADOW_JOBS) or ()), job))

    def __call__(self, record: RequestRecord) -> None:
        """The observer: count the matching request, launch its shadow calls."""
        if not record.watched or record.endpoint == SHADOW:
            return
        now_ms = int(self.clock() * 1000)
        edges = self.store.current.config.sampling.buckets
        low = bucket_low(record.prompt_tokens or 0, edges)
        for name in record.watched:
            self.tally.add(name, now_ms, f"n:{low}")
            self.tally.add(name, now_ms, f"cost:{low}", record.cost_nanos or 0)
        if record.experiment is not None and record.called_model is not None:
            self.store_split_pair(record, now_ms)
        for job in record.note(SHADOW_JOBS) or ():
            self.runner.launch(job, record)
        record.put(SHADOW_JOBS, None)

    def store_split_pair(self, record: RequestRecord, now_ms: int) -> None:
        name, _, arm = (record.experiment or "").partition("; arm=")
        side = side_of(record).to_dict()
        pair = {
            "v": 1,
            "id": record.request_id,
            "t": now_ms,
            "tenant": record.tenant.name if record.tenant is not None else "",
            "mode": "split",
            "tokens": record.prompt_tokens or 0,
            "arm": arm,
            "primary": side if arm == "primary" else None,
            "candidate": side if arm == "candidate" else None,
            "agreement": None,
            "judge": None,
            "tools": record.offered_tools,
        }
        self.store_pair(name, pair)

    def store_pair(self, name: str, pair: dict[str, Any]) -> None:
        self.tally.add_pair(name, pair)

    async def aclose(self, timeout: float = 5.0) -> None:
        """Let the arms being written land (for up to ``timeout`` seconds), then end the shadow calls."""
        if self.writes:
            _, pending = await asyncio.wait(set(self.writes), timeout=timeout)
            for task in pending:
                task.cancel()
        await self.runner.aclose()
