"""A request's part of its conversation: whether it is large enough to keep, and its trace."""

from __future__ import annotations

from typing import Any

import structlog

from gateway.base.record import RequestRecord
from gateway.config.runtime import Runtime
from gateway.config.schema.root import prompt_cache_of
from gateway.conversations.notes import LOOKED
from gateway.conversations.pricing import look_up
from gateway.conversations.recorder import remember_state
from gateway.conversations.store import ConversationStore
from gateway.conversations.trace import ConversationTrace, trace_of
from gateway.core.front import Front
from gateway.core.planning import Plan

log = structlog.get_logger("gateway.conversations")


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


async def look_up_before(
    conversations: ConversationStore,
    record: RequestRecord,
    plan: Plan,
    *,
    model: str,
    front: Front,
    body: dict[str, Any],
) -> None:
    """Read the conversation's state as it was before this request (``notes.LOOKED``), once the
    request's count is known: a request going unchanged after the gateway rewrote the previous one is
    priced on it (``gateway.core.unchanged.lost_cache``), and its new state carries the strategy on."""
    await plan.received()
    if record.note(LOOKED) is not None or plan.count is None or record.tenant is None:
        return
    try:
        looked = await look_up(
            conversations, tenant=record.tenant.name, model=model, front=front, body=body, count=plan.count
        )
        record.put(LOOKED, looked)
    except Exception:  # only an estimate's input: the request goes on as if nothing were known
        log.exception("conversation_look_up_failed", request_id=record.request_id)


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
    if record.looking is not None:
        await record.looking
    assert plan.decision is not None
    trace = conversation_trace(runtime, record, plan, body, called_model=plan.decision.model)
    if trace is None:
        return
    looked = record.note(LOOKED)
    if looked is not None:
        trace.adopt(looked.chain)
        trace.before = looked.recalled.state
    await remember_state(conversations, trace, record)
