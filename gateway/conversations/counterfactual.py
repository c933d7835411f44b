"""Working out the cached tokens a request forwarded unchanged would plausibly have had
(``gateway.base.counterfactual_cache``, whose ``Basis`` says how each is known) from its conversation's cache
state: the prefix it shares with the previous request, an opening seen before, or the tenant's share."""

from __future__ import annotations

from gateway.base.counterfactual_cache import Basis, CounterfactualCache
from gateway.config.schema.root import PromptCacheConfig
from gateway.conversations.fingerprint import Chain
from gateway.conversations.state import Seen


def cacheable(tokens: int, cache: PromptCacheConfig) -> int:
    """What of a shared prefix of ``tokens`` the provider serves from cache."""
    if tokens < cache.min_prefix_tokens:
        return 0
    return tokens - tokens % cache.granularity


LOOKBACK_ELEMENTS = 20
"""How far before one of its breakpoints a request finds a cached prefix (Anthropic looks back about 20
content blocks; counted here in elements, which hold one block or more)."""


def cached_prefix(previous: Seen, current: Chain, *, cache: PromptCacheConfig, now_ms: int) -> int:
    """The tokens of ``current`` the provider serves from what ``previous`` left in its cache."""
    if previous.chain.breakpoints is None or current.breakpoints is None:
        return cacheable(previous.chain.shared_tokens(current), cache)
    return explicit_prefix(previous, current, cache=cache, now_ms=now_ms)


def explicit_prefix(previous: Seen, current: Chain, *, cache: PromptCacheConfig, now_ms: int) -> int:
    """An explicit cache's hit: the longest prefix that ``previous`` wrote at one of its breakpoints (at
    least ``min_prefix_tokens`` long, within that breakpoint's TTL), that ``current`` shares, and that one
    of ``current``'s breakpoints reaches within ``LOOKBACK_ELEMENTS``. Exact, not in steps."""
    assert previous.chain.breakpoints is not None and current.breakpoints is not None
    shared = previous.chain.shared_elements(current)
    marks = [element for element, _ in current.breakpoints]
    best = 0
    for element, ttl in previous.chain.breakpoints:
        if element >= shared or now_ms - previous.time_ms >= ttl * 1000:
            continue
        if any(element <= mark <= element + LOOKBACK_ELEMENTS for mark in marks):
            best = max(best, min(previous.chain.tokens[element], current.tokens[element]))
    return best if best >= cache.min_prefix_tokens else 0


def held_tokens(seen: Seen, *, cache: PromptCacheConfig, now_ms: int) -> int:
    """What the provider still holds of ``seen``'s own prompt: all of it (in steps) for an implicit cache,
    the longest prefix it marked and whose TTL has not run out for an explicit one."""
    breakpoints = seen.chain.breakpoints
    if breakpoints is None:
        return cacheable(seen.chain.tokens[-1], cache)
    warm = [seen.chain.tokens[e] for e, ttl in breakpoints if now_ms - seen.time_ms < ttl * 1000]
    longest = max(warm, default=0)
    return longest if longest >= cache.min_prefix_tokens else 0


def from_conversation(
    previous: Seen, current: Chain, *, model: str, cache: PromptCacheConfig, now_ms: int
) -> CounterfactualCache:
    if previous.model != model or not previous.warm_at(now_ms):
        return CounterfactualCache(0, Basis.CONVERSATION_COLD, written(current, 0))
    cached = cached_prefix(previous, current, cache=cache, now_ms=now_ms)
    return CounterfactualCache(cached, Basis.CONVERSATION, written(current, cached))


def written(current: Chain, cached: int) -> int:
    """What a request with explicit breakpoints writes to the cache: its prefix up to its last breakpoint,
    less what it read (0 for an implicit cache, which bills no writes)."""
    if not current.breakpoints:
        return 0
    last = max(element for element, _ in current.breakpoints)
    return max(0, current.tokens[last] - cached)


def from_opening(tokens: int, cache: PromptCacheConfig) -> CounterfactualCache:
    return CounterfactualCache(cacheable(tokens, cache), Basis.OPENING)


def from_share(share: float | None, prompt_tokens: int, cache: PromptCacheConfig) -> CounterfactualCache:
    if share is None:
        return CounterfactualCache(0, Basis.NONE)
    return CounterfactualCache(cacheable(int(share * prompt_tokens), cache), Basis.TENANT_SHARE)
