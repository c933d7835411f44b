"""The policy engine's view of a conversation's cache: ``policies.facts.CacheFacts`` from its state."""

from __future__ import annotations

from gateway.config.schema.root import PromptCacheConfig
from gateway.conversations.counterfactual import cached_prefix, held_tokens
from gateway.conversations.fingerprint import Chain
from gateway.conversations.store import Recalled
from policies.facts import CacheFacts


def cache_facts(
    recalled: Recalled, chain: Chain, *, model: str, cache: PromptCacheConfig, now_ms: int
) -> CacheFacts | None:
    """None when nothing is known (the store unreachable, or a conversation it never saw)."""
    state = recalled.state
    if not recalled.available or state is None:
        return None
    previous = state.client
    growth = chain.tokens[-1] - previous.chain.tokens[-1] if previous.model == model else None
    branched = state.strategy is not None and chain.shared_elements(previous.chain) < len(previous.chain)
    if state.compacted and state.sent is not None and state.sent.warm_at(now_ms):
        return CacheFacts(
            warm=True,
            cached_tokens=held_tokens(state.sent, cache=cache, now_ms=now_ms),
            growth_tokens=growth if growth is None or growth >= 0 else None,
            compacted=True,
            strategy=state.strategy,
            switches=state.switches,
            precompressed_usd=recalled.precompressed_nanos / 1e9,
            branched=branched,
            mean_growth_tokens=state.mean_growth,
        )
    warm = previous.model == model and previous.warm_at(now_ms)
    return CacheFacts(
        warm=warm,
        cached_tokens=cached_prefix(previous, chain, cache=cache, now_ms=now_ms) if warm else 0,
        growth_tokens=growth if growth is None or growth >= 0 else None,
        strategy=state.strategy,
        switches=state.switches,
        precompressed_usd=recalled.precompressed_nanos / 1e9,
        branched=branched,
        mean_growth_tokens=state.mean_growth,
    )
