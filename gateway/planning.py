"""Steps 3, 4 and 6 of a chat request: count its tokens, ask the policy engine, run the transforms.

Counting is exact wherever it can change the decision. A body small enough to count in microseconds is
counted inline (per-message counts are cached, so a growing conversation costs only its new turn). A larger
body whose byte size proves it is below the warning line is decided on that bound, and counted exactly in a
worker thread while the upstream call runs (for the response headers and the ledger). Anything else is
counted before the decision, off the event loop when large.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import anyio.to_thread

from gateway.errors import ContextLengthExceeded, GatewayError, PermissionDenied, ServiceUnavailable
from gateway.runtime import Runtime
from gateway.tokens.counter import TokenCount
from policies import Action, Decision, Facts

INLINE_COUNT_BYTES = 16 * 1024


class TransformFailed(Exception):
    """A transform could not produce a request (the cheap model failed, nothing left to cut, ...)."""


class Transforms(Protocol):
    async def run(self, step: Action, messages: list[Any], decision: Decision, facts: Facts) -> list[Any]:
        """Return the transformed messages; raise TransformFailed when the transform cannot be done."""
        ...


@dataclass(slots=True)
class Plan:
    decision: Decision | None
    """None: the model is not under policy (not a chat model the engine knows)."""
    body: dict[str, Any]
    changed: bool = False
    """The messages were transformed; the body must be serialised again."""
    received_tokens: int | None = None
    forwarded_tokens: int | None = None
    count: TokenCount | None = None
    _pending: Awaitable[TokenCount] | None = field(default=None, repr=False)

    async def received(self) -> int | None:
        """The exact token count of the request as received, waiting for the background count if any."""
        if self._pending is not None:
            self.count = await self._pending
            self._pending = None
            self.received_tokens = self.count.total
            if self.decision is not None and self.decision.action is Action.FORWARD and not self.changed:
                self.forwarded_tokens = self.count.total
        return self.received_tokens


async def plan_chat(
    runtime: Runtime,
    *,
    tenant: str,
    model: str,
    body: dict[str, Any],
    body_len: int,
    headers: Mapping[str, str],
    transforms: Transforms,
    admit: Callable[[int], Awaitable[None]],
) -> Plan:
    """Count, decide, admit (``admit(tokens)``: the budget hold, before any upstream call), transform."""
    engine, counter = runtime.engine, runtime.counter
    bands = engine.bands.get(model)
    if bands is None:
        await admit(counter.upper_bound(model, body, body_len=body_len))
        return Plan(decision=None, body=body)
    plan = Plan(decision=None, body=body)
    if body_len <= INLINE_COUNT_BYTES:
        plan.count = counter.count_chat(model, body)
        tokens = plan.count.total
    else:
        bound = counter.upper_bound(model, body, body_len=body_len)
        if bound < bands.warning:
            tokens = bound
            plan._pending = asyncio.ensure_future(anyio.to_thread.run_sync(counter.count_chat, model, body))
        else:
            plan.count = await counter.count_chat_async(model, body, body_len=body_len)
            tokens = plan.count.total
    if plan.count is not None:
        plan.received_tokens = plan.count.total
    tenant_config = runtime.config.tenants.get(tenant)
    facts = Facts(
        tenant=tenant,
        model=model,
        prompt_tokens=tokens,
        headers={name: value for name in engine.header_names if (value := headers.get(name)) is not None},
        tenant_allows_passthrough=bool(tenant_config and tenant_config.allow_passthrough),
        history_share=_history_share(plan.count),
    )
    decision = engine.decide(facts)
    if decision.rejection is not None:
        plan.decision = decision
        raise _rejection_error(decision)
    await admit(tokens)
    messages: list[Any] = body["messages"]
    while decision.transforms and decision.rejection is None:
        step = decision.transforms[0]
        try:
            messages = await transforms.run(step, messages, decision, facts)
        except TransformFailed as exc:
            decision = engine.after_failure(decision, facts, reason=str(exc))
            continue
        plan.changed = True
        counted = await counter.count_chat_async(model, {**body, "messages": messages}, body_len=0)
        decision = engine.after_transform(decision, facts, counted.total)
    plan.decision = decision
    if decision.rejection is not None:
        raise _rejection_error(decision)
    if plan.changed:
        plan.body = {**body, "messages": messages}
    plan.forwarded_tokens = decision.tokens if (plan.changed or plan.count is not None) else None
    return plan


def _history_share(count: TokenCount | None) -> float:
    """The share of the prompt outside its largest message: high for long chats, low for one document."""
    if count is None or not count.per_message or count.total <= 0:
        return 0.0
    return max(0.0, 1.0 - max(count.per_message) / count.total)


def _rejection_error(decision: Decision) -> GatewayError:
    rejection = decision.rejection
    assert rejection is not None
    error: GatewayError
    if rejection.status == 400:
        error = ContextLengthExceeded(rejection.message, param="messages", code=rejection.code)
    elif rejection.status == 503:
        error = ServiceUnavailable(rejection.message, code=rejection.code)
    else:
        error = PermissionDenied(rejection.message, code=rejection.code)
        error.status_code = rejection.status
    return error
