"""After a request's answer: its conversation's new cache state, written in the background.

An observer (it runs once the response is written, so it delays nothing): for a request that reached a
model and carries a trace, what the client sent and what went upstream become the conversation's state,
and a request forwarded unchanged adds its reported cached tokens to the tenant's cached share. Large
prompts are fingerprinted in a worker thread.
"""

from __future__ import annotations

import time

import anyio.to_thread

from gateway.background import Background
from gateway.conversations.state import ConversationState
from gateway.conversations.store import ConversationStore, ShareUpdate
from gateway.conversations.trace import ConversationTrace
from gateway.record import RequestRecord

THREAD_FROM_TOKENS = 32_000
"""Prompts at least this large are fingerprinted off the event loop."""


class ConversationRecorder:
    def __init__(self, store: ConversationStore, background: Background) -> None:
        self._store = store
        self._background = background

    def __call__(self, record: RequestRecord) -> None:
        trace = record.conversation
        if trace is None or record.called_model is None or not 200 <= record.status < 300:
            return
        usage = record.usage
        share = None
        if (
            trace.sent is None
            and record.called_model == trace.model
            and usage is not None
            and not usage.estimated
            and usage.input_tokens >= trace.cache.min_prefix_tokens
        ):
            share = ShareUpdate(trace.model, usage.input_tokens, usage.cached_input_tokens)
        cached = usage.cached_input_tokens if usage is not None else 0
        self._background.spawn(self._remember(trace, cached, share), name="conversation_state")

    async def _remember(self, trace: ConversationTrace, cached: int, share: ShareUpdate | None) -> None:
        if trace.received.count.total >= THREAD_FROM_TOKENS:
            state = await anyio.to_thread.run_sync(_state, trace, cached)
        else:
            state = _state(trace, cached)
        anchor = trace.anchor
        await self._store.remember(
            trace.tenant,
            anchor,
            state,
            ttl_seconds=trace.retention_seconds,
            now_ms=int(time.time() * 1000),
            share=share,
        )


def _state(trace: ConversationTrace, cached: int) -> ConversationState:
    return ConversationState(client=trace.client_seen(), sent=trace.sent_seen(), sent_cached_tokens=cached)
