"""Step 5, admit: hold the request's maximum cost against its tenant's budget before any upstream call.

The hold is the most the request can cost: its call on the most expensive model it may go to (the
decided one and its fallbacks), every choice's output cap included, and the most its server-side tools can
cost there (each tool's ``max_uses``, Responses' ``max_tool_calls``, else ``limits.held_tool_uses``, times
the model's ``per_use`` price: ``gateway.core.metering.held_tool_nanos``), plus the side calls its transforms
may make (the cheap model's summary calls, the embeddings of hybrid retrieval). It is settled by the request's
own cost event (the ledger applies both in one step) or released when the request fails before it reaches a
model. Requests from a trusted probe are billed to the ``probe`` tenant and take no hold on the caller's
budget.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from compressors.summary.settings import DEFAULT_CHUNK_TOKENS, DEFAULT_SUMMARY_MAX_TOKENS, PROMPT_RESERVE
from gateway.base.money import nanos_from_usd
from gateway.base.record import RequestRecord
from gateway.base.types import Usage
from gateway.config.passthrough import Grant
from gateway.config.runtime import Route, Runtime
from gateway.config.schema.root import GatewayConfig
from gateway.config.schema.sampling import PROBE_TENANT
from gateway.core.metering import max_cost_nanos
from gateway.core.planning import Plan
from gateway.ledger import Budgets, KeyBudget, Reservation
from gateway.money.pricing import price
from gateway.sampling.decide import trusted_probe
from gateway.servertools.requested import NO_TOOLS, RequestedTools
from policies import Decision


class Hold:
    def __init__(self, budgets: Budgets) -> None:
        self._budgets = budgets
        self._reservation: Reservation | None = None

    async def take(
        self,
        runtime: Runtime,
        record: RequestRecord,
        headers: Mapping[str, str],
        max_cost_nanos: Callable[[], int],
    ) -> None:
        """Raises BudgetExceeded (429) or ServiceUnavailable (503, budget unreadable and failing closed).

        The tenant's budget and the key's own (a managed key's) are held together, in one atomic step.
        ``max_cost_nanos`` is only computed when one of them has a budget."""
        assert record.tenant is not None
        if trusted_probe(headers, tenant=record.tenant.name, config=runtime.config.sampling):
            record.bill_tenant = PROBE_TENANT
            return
        budgets = self._budgets
        key_budget = budgets.key_budget_of(record.tenant.key_id) if record.tenant.managed else None
        if budgets.budget_of(record.tenant.name) is None and key_budget is None:
            return
        key = None if key_budget is None else KeyBudget(record.tenant.key_id, key_budget)
        self._reservation = await budgets.reserve(
            record.tenant.name, record.request_id, max_cost_nanos(), key
        )
        if self._reservation is not None and self._reservation.warning:
            record.warnings = (*record.warnings, self._reservation.warning)

    async def release(self) -> None:
        """The request ends without a cost event of its own: give the held amount back."""
        reservation, self._reservation = self._reservation, None
        await self._budgets.release(reservation)


def ceiling_nanos(
    runtime: Runtime,
    requested: str,
    decision: Decision | None,
    tokens: int,
    caps: Mapping[str, Any],
    tools: RequestedTools = NO_TOOLS,
) -> int:
    """The most a chat, Responses or Messages request of ``tokens`` input tokens can cost, its server-side
    ``tools`` included (see the module docstring)."""
    names = {route.public_model for route in runtime.candidates(requested)}
    if decision is not None:
        names.update(route.public_model for route in runtime.candidates(decision.model))
    models = runtime.config.models
    call = max((max_cost_nanos(models.get(name), tokens, caps, tools=tools) for name in names), default=0)
    return call + transforms_ceiling_nanos(runtime.config, decision, tokens)


def transforms_ceiling_nanos(config: GatewayConfig, decision: Decision | None, tokens: int) -> int:
    """The most the side calls of ``decision``'s transforms can cost: a summary of everything in chunks
    (each chunk's summary, then merges, each call at most ``summary_max_tokens`` out), and embeddings of
    the whole prompt twice over (chunks with their overlaps, and the question)."""
    if decision is None or not decision.transforms:
        return 0
    settings = decision.compress
    cheap = config.models.get(settings.cheap_model or decision.model)
    calls = 2 * math.ceil(tokens / (settings.chunk_tokens or DEFAULT_CHUNK_TOKENS)) + 1
    summary = Usage(
        input_tokens=tokens + calls * (PROMPT_RESERVE + DEFAULT_SUMMARY_MAX_TOKENS),
        output_tokens=calls * DEFAULT_SUMMARY_MAX_TOKENS,
    )
    total = price(summary, cheap.pricing).total_nanos if cheap and cheap.pricing else 0
    embedder = decision.retrieve.embedding_model if decision.retrieve.hybrid else None
    embedding = config.models.get(embedder) if embedder else None
    if embedding is not None:
        total += max_cost_nanos(embedding, 2 * tokens, {}, output=False)
    return total


def passthrough_ceiling_nanos(
    grant: Grant, route: Route, body_len: int, body: Mapping[str, Any] | None
) -> int:
    """A passthrough call: its entry's hold, or what its body's model can cost on that many bytes (one
    token per byte at most, plus the output cap), whichever is more, plus its price per call."""
    by_model = max_cost_nanos(route.model, body_len, body) if body is not None else 0
    return max(nanos_from_usd(grant.route.hold_usd), by_model) + nanos_from_usd(grant.route.price_usd)


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
