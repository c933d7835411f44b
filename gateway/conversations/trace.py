"""A request's part of its conversation: the prompt it received and the one it sent, as fingerprints.

Built after the upstream answered, for the requests worth it: those the gateway rewrote, and those large
enough to be cached (``limits.track_conversations_from``, at least the cache's minimum prefix). The
fingerprints are computed when first asked for (a rewritten request needs them for its cost event; the
others only in the background, after their answer).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gateway.config.schema.root import GatewayConfig, PromptCacheConfig, prompt_cache_of
from gateway.conversations.fingerprint import Chain, Opening, anchor_of, chain_of, opening_of
from gateway.conversations.state import ConversationState, Seen
from gateway.core.front import Front, countable
from gateway.core.planning import Plan
from gateway.tokens.counter import TokenCount
from policies import Action
from policies.facts import Strategy

EXTENDED_RETENTION = "24h"


@dataclass(frozen=True, slots=True)
class Prompt:
    """One prompt (a body, its front and its count), fingerprinted on demand."""

    front: Front
    body: Mapping[str, Any]
    count: TokenCount

    def chain(self) -> Chain:
        views = self.front.messages(self.body)
        return chain_of(
            self.body.get("tools"),
            [countable(message) for message in views],
            tools_tokens=self.count.tools,
            per_message=self.count.per_message,
            breakpoints=self.front.breakpoints(self.body, views),
        )


def retention_of(chain: Chain, default: float) -> float:
    """How long the provider keeps what ``chain`` left: the longest TTL of its breakpoints (an explicit
    cache), else ``default``."""
    if chain.breakpoints is None or not chain.breakpoints:
        return default
    return float(max(ttl for _, ttl in chain.breakpoints))


def anchor_for(prompt: Prompt, chain: Chain) -> str:
    """The name of the conversation ``prompt`` belongs to (``fingerprint.anchor_of``)."""
    messages = prompt.front.messages(prompt.body)
    return anchor_of(chain, messages, cache_key=prompt.body.get("prompt_cache_key"))


def opening_for(prompt: Prompt, chain: Chain) -> Opening | None:
    """The prompt's opening prefix (``fingerprint.opening_of``), for an implicit cache only: an explicit
    one keeps no prefix that no breakpoint ends."""
    if chain.breakpoints is not None:
        return None
    return opening_of(chain, prompt.front.messages(prompt.body))


@dataclass(slots=True)
class ConversationTrace:
    tenant: str
    model: str
    """The model the client asked for (the one whose cache the counterfactual prices)."""
    called_model: str
    cache: PromptCacheConfig
    retention_seconds: float
    time_ms: int
    received: Prompt
    sent: Prompt | None
    """What went upstream, when the gateway rewrote it."""
    compacted: bool = False
    """The rewrite included a summary (not only excerpts)."""
    strategy: Strategy | None = None
    """How the gateway cut this request (``compress`` when a summary went, else ``retrieve``); None:
    forwarded as received."""
    before: ConversationState | None = None
    """The conversation's state as read for this request, when it was (its strategy and switches)."""
    memory_seconds: float = 0.0
    """The state is kept at least this long (``limits.conversation_memory_seconds``), past the retention."""
    _chains: dict[str, Chain] = field(default_factory=dict)

    def chain(self, which: str = "received") -> Chain:
        found = self._chains.get(which)
        if found is None:
            prompt = self.received if which == "received" else self.sent
            assert prompt is not None
            found = self._chains[which] = prompt.chain()
        return found

    @property
    def anchor(self) -> str:
        return anchor_for(self.received, self.chain())

    @property
    def opening(self) -> Opening | None:
        return opening_for(self.received, self.chain())

    def adopt(self, chain: Chain) -> None:
        """Take the received prompt's chain computed already (when the conversation was read)."""
        self._chains["received"] = chain

    def client_seen(self) -> Seen:
        chain = self.chain()
        return Seen(self.model, self.time_ms, retention_of(chain, self.retention_seconds), chain)

    def sent_seen(self) -> Seen | None:
        if self.sent is None:
            return None
        chain = self.chain("sent")
        return Seen(self.called_model, self.time_ms, retention_of(chain, self.retention_seconds), chain)


def trace_of(
    config: GatewayConfig,
    *,
    tenant: str,
    model: str,
    called_model: str,
    body: Mapping[str, Any],
    plan: Plan,
    started_at: float | None = None,
) -> ConversationTrace | None:
    """The trace of a request planned as ``plan`` from ``body``; None when it is not worth keeping (too
    small to be cached and not rewritten) or cannot be fingerprinted (not counted exactly)."""
    count = plan.count
    if count is None or plan.decision is None:
        return None
    cache = prompt_cache_of(config, model)
    threshold = max(cache.min_prefix_tokens, config.limits.track_conversations_from)
    if not plan.changed and count.total < threshold:
        return None
    sent = Prompt(plan.front, plan.body, plan.sent_count) if plan.changed and plan.sent_count else None
    extended = body.get("prompt_cache_retention") == EXTENDED_RETENTION
    return ConversationTrace(
        tenant=tenant,
        model=model,
        called_model=called_model,
        cache=cache,
        retention_seconds=cache.extended_retention_seconds if extended else cache.retention_seconds,
        time_ms=int((started_at if started_at is not None else time.time()) * 1000),
        received=Prompt(plan.front, body, count),
        sent=sent,
        compacted=sent is not None and Action.COMPRESS in plan.decision.applied,
        strategy=strategy_of(plan.decision.applied) if sent is not None else None,
        memory_seconds=config.limits.conversation_memory_seconds,
    )


def strategy_of(applied: tuple[Action, ...]) -> Strategy | None:
    """The strategy the transforms a request went through amount to."""
    if Action.COMPRESS in applied:
        return Strategy.COMPRESS
    return Strategy.RETRIEVE if Action.RETRIEVE in applied else None
