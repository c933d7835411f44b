"""The counterfactual cache of a request the gateway rewrote: its conversation's state, read once."""

from __future__ import annotations

import anyio.to_thread

from gateway.conversations.counterfactual import CounterfactualCache, from_conversation, from_share
from gateway.conversations.recorder import THREAD_FROM_TOKENS
from gateway.conversations.store import ConversationStore
from gateway.conversations.trace import ConversationTrace


async def counterfactual_of(store: ConversationStore, trace: ConversationTrace) -> CounterfactualCache:
    """What the provider would have had cached of the request as received: from the client's previous
    request of the conversation, else from the tenant's cached share (``counterfactual`` module)."""
    if trace.received.count.total >= THREAD_FROM_TOKENS:
        await anyio.to_thread.run_sync(trace.chain)
    recalled = await store.recall(trace.tenant, trace.anchor, trace.model)
    if recalled.state is not None:
        return from_conversation(
            recalled.state.client, trace.chain(), model=trace.model, cache=trace.cache, now_ms=trace.time_ms
        )
    return from_share(recalled.share, trace.received.count.total, trace.cache)
