"""A request's part of its conversation: whether it is large enough to keep, and its trace."""

from __future__ import annotations

from typing import Any

from gateway.config import prompt_cache_of
from gateway.conversations.recorder import remember_state
from gateway.conversations.store import ConversationStore
from gateway.conversations.trace import ConversationTrace, trace_of
from gateway.planning import Plan
from gateway.record import RequestRecord
from gateway.runtime import Runtime


def conversation_trace(
    runtime: Runtime, record: RequestRecord, plan: Plan, body: dict[str, Any], *, called_model: str
) -> ConversationTrace | None:
    """The request's part of its conversation (``gateway.conversations.trace``), when it has one."""
    if record.tenant is None or record.requested_model is None:
        return None
    return trace_of(
        runtime.config,
        tenant=record.tenant.name,
        model=record.routed_model or record.requested_model,
        called_model=called_model,
        body=body,
        plan=plan,
        started_at=record.started_at,
    )


def tracked(runtime: Runtime, model: str, plan: Plan) -> bool:
    """Whether the request may be large enough to leave its conversation's state (its exact count when
    known, else the bound it was decided on): the many small requests cost nothing here."""
    tokens = (
        plan.received_tokens
        if plan.received_tokens is not None
        else plan.decision.tokens
        if plan.decision
        else 0
    )
    cache = prompt_cache_of(runtime.config, model)
    return tokens >= max(cache.min_prefix_tokens, runtime.config.limits.track_conversations_from)


async def remember_request(
    conversations: ConversationStore,
    runtime: Runtime,
    record: RequestRecord,
    plan: Plan,
    body: dict[str, Any],
) -> None:
    """Write the conversation's new state while the upstream answers, so that the next turn (an agent's
    comes the moment this one is answered) finds it (``gateway.conversations.recorder``)."""
    await plan.received()
    assert plan.decision is not None
    trace = conversation_trace(runtime, record, plan, body, called_model=plan.decision.model)
    if trace is None:
        return
    if record.looked is not None:
        trace.adopt(record.looked.chain)
        trace.before = record.looked.recalled.state
    await remember_state(conversations, trace)
