"""The cached tokens a request forwarded unchanged would plausibly have had, and how that was known.

- ``forwarded``: the request went as the client sent it, to the model it asked for: its own usage is the
  counterfactual (saving 0).
- ``as_sent``: the policy rerouted it unchanged to another model: its own cached tokens, priced on the
  model asked for. (A fallback that answered because the model asked for failed saves nothing:
  ``forwarded``.)
- ``conversation``: it was rewritten, and the client's previous request of the conversation is known and
  still inside the cache's retention: the tokens of the longest prefix the two share, rounded down to the
  cache's granularity, none below its minimum (the provider would hold that previous request). With an
  explicit cache (``cache_control`` breakpoints, ``explicit_prefix``) only the prefixes the previous
  request marked were kept, each for its own TTL.
- ``conversation_cold``: the previous request is known but idle past the retention (or on another model):
  nothing would have been cached.
- ``opening``: it was rewritten, the conversation is unknown (an edited first message names a new one; a
  new conversation), but a request opening the same way (the same tools and system prompt, the prefix
  before the first user message) went to that model within the retention: that opening prefix.
- ``tenant_share``: nothing is known of the conversation (its first request through the gateway, or the
  state unreadable): the share of input the tenant's unchanged requests to that model had cached.
  Estimated.
- ``none``: not even that share is known: no cached tokens assumed. Estimated.
- ``conversation_lost``: it went unchanged, but the gateway had rewritten the conversation's previous
  request, so the provider lacked the prefix it would otherwise have held (a branch or an edit back to
  before a compaction, a forward after a compression): priced as ``conversation``, against the request's
  own cost, its saving is negative, a loss the gateway's earlier rewrite caused.
- ``over_window``: it was rewritten, and the prompt as received is larger than the context window of the
  model asked for: forwarding it unchanged was impossible (the provider refuses it, unbilled), so there is
  nothing to have saved against; its own cost is the counterfactual (saving 0).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from gateway.config import PromptCacheConfig
from gateway.conversations.fingerprint import Chain
from gateway.conversations.state import Seen


class Basis(StrEnum):
    FORWARDED = "forwarded"
    AS_SENT = "as_sent"
    CONVERSATION = "conversation"
    CONVERSATION_COLD = "conversation_cold"
    CONVERSATION_LOST = "conversation_lost"
    OPENING = "opening"
    TENANT_SHARE = "tenant_share"
    NONE = "none"
    OVER_WINDOW = "over_window"


ESTIMATED = frozenset({Basis.TENANT_SHARE, Basis.NONE})


@dataclass(frozen=True, slots=True)
class CounterfactualCache:
    tokens: int
    basis: Basis
    writes: int = 0
    """With an explicit cache: the tokens the unchanged request would have written to it (those up to its
    last breakpoint that it did not read)."""

    @property
    def estimated(self) -> bool:
        return self.basis in ESTIMATED


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
