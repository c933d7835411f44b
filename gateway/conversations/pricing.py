"""Reading a request's conversation once: for the engine's cache facts, and for its counterfactual."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import anyio.to_thread

from gateway.base.counterfactual_cache import CounterfactualCache
from gateway.conversations.counterfactual import from_conversation, from_opening, from_share
from gateway.conversations.recorder import THREAD_FROM_TOKENS
from gateway.conversations.store import ConversationStore, Looked
from gateway.conversations.trace import ConversationTrace, Prompt, anchor_for, opening_for
from gateway.core.front import Front
from gateway.tokens.counter import TokenCount


async def look_up(
    store: ConversationStore,
    *,
    tenant: str,
    model: str,
    front: Front,
    body: Mapping[str, Any],
    count: TokenCount,
) -> Looked:
    prompt = Prompt(front, body, count)
    chain = (
        await anyio.to_thread.run_sync(prompt.chain) if count.total >= THREAD_FROM_TOKENS else prompt.chain()
    )
    anchor = anchor_for(prompt, chain)
    opening = opening_for(prompt, chain)
    name = opening.name if opening is not None else None
    return Looked(anchor, chain, await store.recall(tenant, anchor, model, name))


def rewritten_before(looked: Looked | None) -> bool:
    """Whether the gateway rewrote the previous request of the conversation ``looked`` read: a request
    going unchanged after it finds the provider without the prefix the client's own would have left."""
    state = looked.recalled.state if looked is not None else None
    return state is not None and state.sent is not None


async def counterfactual_of(
    store: ConversationStore, trace: ConversationTrace, looked: Looked | None = None
) -> CounterfactualCache:
    """What the provider would have had cached of the request as received: from the client's previous
    request of the conversation, else from the tenant's cached share (``counterfactual`` module).
    ``looked``: the conversation as already read for this request (read here otherwise)."""
    if looked is not None:
        trace.adopt(looked.chain)
        recalled = looked.recalled
    else:
        if trace.received.count.total >= THREAD_FROM_TOKENS:
            await anyio.to_thread.run_sync(trace.chain)
        opening = trace.opening
        name = opening.name if opening is not None else None
        recalled = await store.recall(trace.tenant, trace.anchor, trace.model, name)
    if recalled.state is not None:
        return from_conversation(
            recalled.state.client, trace.chain(), model=trace.model, cache=trace.cache, now_ms=trace.time_ms
        )
    if recalled.opening_tokens is not None:
        return from_opening(recalled.opening_tokens, trace.cache)
    return from_share(recalled.share, trace.received.count.total, trace.cache)
