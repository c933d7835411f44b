"""A conversation's cache state, written as soon as its request is planned, and the tenant's cached share.

``remember_state`` runs in the background right after a request is planned, concurrently with its
upstream call: the next turn of an agent, sent the moment this one answers, must find it. It writes what
the client sent and what went upstream (large prompts are fingerprinted in a worker thread). The
``ConversationRecorder`` observer runs after the answer: a request forwarded unchanged adds its reported
cached tokens to the tenant's cached share (the counterfactual of conversations the gateway never saw).
"""

from __future__ import annotations

import time

import anyio.to_thread

from gateway.base.background import Background
from gateway.base.record import RequestRecord
from gateway.conversations.notes import TRACE
from gateway.conversations.state import ConversationState, carried, mean_growth
from gateway.conversations.store import ConversationStore, ShareUpdate
from gateway.conversations.trace import ConversationTrace

THREAD_FROM_TOKENS = 32_000
"""Prompts at least this large are fingerprinted off the event loop."""


async def remember_state(
    store: ConversationStore, trace: ConversationTrace, record: RequestRecord | None = None
) -> None:
    """Compute the conversation's new state and write it; its name goes on ``record`` as soon as it is
    known (before the write), for the request's cost event."""
    if trace.received.count.total >= THREAD_FROM_TOKENS:
        state = await anyio.to_thread.run_sync(_state, trace)
    else:
        state = _state(trace)
    anchor = trace.anchor
    if record is not None:
        record.conversation = anchor
    await store.remember(
        trace.tenant,
        anchor,
        state,
        ttl_seconds=max(
            trace.memory_seconds,
            trace.retention_seconds,
            state.client.retention_seconds,
            state.sent.retention_seconds if state.sent is not None else 0.0,
        ),
        now_ms=int(time.time() * 1000),
        opening=trace.opening,
        opening_seconds=trace.retention_seconds,
    )


def _state(trace: ConversationTrace) -> ConversationState:
    """The new state; the strategy is carried through a forwarded request, and a change counted."""
    strategy, switches = carried(trace.before, trace.strategy)
    client = trace.client_seen()
    return ConversationState(
        client=client,
        mean_growth=mean_growth(trace.before, client),
        sent=trace.sent_seen(),
        compacted=trace.compacted,
        strategy=strategy,
        switches=switches,
    )


class ConversationRecorder:
    def __init__(self, store: ConversationStore, background: Background) -> None:
        self._store = store
        self._background = background

    def __call__(self, record: RequestRecord) -> None:
        trace, usage = record.note(TRACE), record.usage
        if (
            trace is None
            or trace.sent is not None
            or record.called_model != trace.model
            or not 200 <= record.status < 300
            or usage is None
            or usage.estimated
            or usage.input_tokens < trace.cache.min_prefix_tokens
        ):
            return
        share = ShareUpdate(trace.model, usage.input_tokens, usage.cached_input_tokens)
        self._background.spawn(self._store.add_share(trace.tenant, share), name="cache_share")
