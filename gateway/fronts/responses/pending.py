"""Costs of background responses (``background: true``), recorded when the responses end.

Their creation is answered at once (status ``queued`` or ``in_progress``, no usage yet), and a streamed
one goes on running upstream when its client leaves. Such a request's cost event is not written with the
request: it is written when the gateway first sees the response ended, with the same id (so the budget
hold taken at creation is settled by it and two sightings never count twice), from whichever comes first:

- a client's poll through the gateway (``GET /v1/responses/{id}``, streamed or not) or its cancel;
- the gateway's own look, for responses nobody asks about through it (a client told by webhook): every
  few seconds each replica claims the due ones from ``gw:responses:pending`` (a lease, so replicas share
  the work) and asks the provider, first 15 s after creation, then at a quarter of the response's age
  (at most every 10 minutes).

A response the provider no longer knows (deleted, expired), one that ended without usage, and one still
running after ``GIVE_UP_SECONDS`` are recorded with the gateway's estimate (the input it sent, marked
estimated), so that no response goes unbilled.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import structlog

from gateway.base.counterfactual_cache import Basis, CounterfactualCache
from gateway.base.errors import GatewayError, RouteNotFound, UpstreamError, UpstreamRejected
from gateway.base.record import Observer, RequestRecord, notify
from gateway.base.types import Tenant
from gateway.config.reload import ConfigStore
from gateway.core.body import json_object
from gateway.fronts.responses.memory import Remembered, ResponseMemory
from gateway.fronts.responses.stream import finish_reason_of
from gateway.fronts.responses.where import route_for_id
from gateway.money.usage import usage_from_openai
from gateway.servertools.reported import response_uses
from gateway.upstream.calls import send
from gateway.upstream.clients import UpstreamPool

TERMINAL = frozenset({"completed", "incomplete", "failed", "cancelled"})
SWEEP_SECONDS = 5.0
LEASE_MS = 60_000
MIN_DELAY_MS = 15_000
MAX_DELAY_MS = 600_000
GIVE_UP_SECONDS = 7 * 24 * 3600
CLAIM_LIMIT = 50

log = structlog.get_logger("gateway.responses")


def settlement(tenant: str, remembered: Remembered, response: Mapping[str, Any] | None) -> RequestRecord:
    """The record of a background response that ended (``response``; None: it is gone), for the
    observers: the ledger prices it as the request that created it."""
    pending = remembered.pending
    assert pending is not None
    record = RequestRecord(
        request_id=pending.request_id,
        endpoint="responses_background",
        tenant=Tenant(name=tenant, key_id=pending.key_id),
        started=time.perf_counter() - max(0.0, time.time() - pending.started_at),
        started_at=pending.started_at,
        client_request_id=pending.client_request_id,
    )
    record.requested_model = pending.requested_model
    record.called_model = remembered.model
    record.provider = remembered.provider
    record.action = pending.action
    record.prompt_tokens = pending.prompt_tokens
    record.forwarded_tokens = pending.forwarded_tokens
    record.bill_tenant = pending.bill_tenant
    record.stream = pending.stream
    record.tags = pending.tags
    record.status = 200
    if pending.counterfactual is not None:
        tokens, basis = pending.counterfactual
        record.transformed = True
        record.counterfactual = CounterfactualCache(int(tokens), Basis(basis))
    if response is not None:
        record.usage = usage_from_openai(response.get("usage"))
        record.tool_uses = response_uses(response)
        record.finish_reason = finish_reason_of(response)
    return record


class Settler:
    def __init__(
        self,
        memory: ResponseMemory,
        *,
        observers: tuple[Observer, ...],
        store: ConfigStore,
        pool: UpstreamPool,
    ) -> None:
        self._memory = memory
        self._observers = observers
        self._store = store
        self._pool = pool

    async def observe(
        self, tenant: str, response_id: str, remembered: Remembered | None, response: object
    ) -> bool:
        """A response object on its way to a client: record the cost of a pending one that has ended."""
        if remembered is None or remembered.pending is None or not isinstance(response, Mapping):
            return False
        if response.get("status") not in TERMINAL:
            return False
        await self._settle(tenant, response_id, remembered, response)
        return True

    async def look(
        self,
        tenant: str,
        response_id: str,
        *,
        now_ms: int | None = None,
        remembered: Remembered | None = None,
    ) -> None:
        """Ask the provider about one pending response: record it if it ended, else look again later.
        ``remembered``: what the caller already recalled of it."""
        now_ms = now_ms if now_ms is not None else int(time.time() * 1000)
        remembered = remembered or await self._memory.recall(tenant, response_id)
        if remembered is None or remembered.pending is None:
            await self._memory.settled(tenant, response_id)
            return
        age_ms = max(0, now_ms - int(remembered.pending.started_at * 1000))
        try:
            route = route_for_id(self._store.current, remembered)
            exchange = await send(
                self._pool,
                (route,),
                path=f"/responses/{response_id}",
                body_for=lambda route: b"",
                incoming_headers={},
                stream=False,
                method="GET",
            )
        except (UpstreamRejected, RouteNotFound) as exc:
            if isinstance(exc, RouteNotFound) or exc.status_code == 404:
                log.warning("background_response_gone", response_id=response_id, tenant=tenant)
                await self._settle(tenant, response_id, remembered, None)
                return
            await self._later(tenant, response_id, remembered, now_ms, age_ms)
            return
        except (UpstreamError, GatewayError) as exc:
            log.warning("background_response_unreachable", response_id=response_id, error=type(exc).__name__)
            await self._later(tenant, response_id, remembered, now_ms, age_ms)
            return
        data = json_object(exchange.response.content)
        if not await self.observe(tenant, response_id, remembered, data):
            await self._later(tenant, response_id, remembered, now_ms, age_ms)

    async def sweep(self, *, now_ms: int | None = None) -> int:
        """Look at the pending responses due now; how many were looked at."""
        now_ms = now_ms if now_ms is not None else int(time.time() * 1000)
        due = await self._memory.claim_pending(now_ms, lease_ms=LEASE_MS, limit=CLAIM_LIMIT)
        for tenant, response_id in due:
            try:
                await self.look(tenant, response_id, now_ms=now_ms)
            except Exception:
                log.exception("background_response_look_failed", response_id=response_id)
        return len(due)

    async def run(self, interval: float = SWEEP_SECONDS) -> None:
        """Sweep every ``interval`` seconds until cancelled."""
        while True:
            await asyncio.sleep(interval)
            try:
                await self.sweep()
            except Exception:
                log.exception("background_response_sweep_failed")

    async def _later(
        self, tenant: str, response_id: str, remembered: Remembered, now_ms: int, age_ms: int
    ) -> None:
        if age_ms >= GIVE_UP_SECONDS * 1000:
            log.warning("background_response_given_up", response_id=response_id, tenant=tenant)
            await self._settle(tenant, response_id, remembered, None)
            return
        delay = min(MAX_DELAY_MS, max(MIN_DELAY_MS, age_ms // 4))
        await self._memory.look_again(tenant, response_id, now_ms + delay)

    async def _settle(
        self, tenant: str, response_id: str, remembered: Remembered, response: Mapping[str, Any] | None
    ) -> None:
        record = settlement(tenant, remembered, response)
        notify(self._observers, record)
        usage = record.usage
        ended = replace(
            remembered,
            pending=None,
            input_tokens=usage.input_tokens if usage else remembered.input_tokens,
            output_tokens=usage.output_tokens if usage else remembered.output_tokens,
        )
        await self._memory.remember(tenant, response_id, ended)
        await self._memory.settled(tenant, response_id)
