"""The cached tokens a request forwarded unchanged would plausibly have had, and how that was known.

- ``forwarded``: the request went as the client sent it, to the model it asked for: its own usage is the
  counterfactual (saving 0).
- ``as_sent``: the policy rerouted it unchanged to another model: its own cached tokens, priced on the
  model asked for. (A fallback that answered because the model asked for failed saves nothing:
  ``forwarded``.)
- ``conversation``: it was rewritten, and the client's previous request of the conversation is known and
  still inside the cache's retention: the tokens of the longest prefix the two share, rounded down to the
  cache's granularity, none below its minimum (the provider would hold that previous request).
- ``conversation_cold``: the previous request is known but idle past the retention (or on another model):
  nothing would have been cached.
- ``tenant_share``: nothing is known of the conversation (its first request through the gateway, or the
  state unreadable): the share of input the tenant's unchanged requests to that model had cached.
  Estimated.
- ``none``: not even that share is known: no cached tokens assumed. Estimated.
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
    TENANT_SHARE = "tenant_share"
    NONE = "none"


ESTIMATED = frozenset({Basis.TENANT_SHARE, Basis.NONE})


@dataclass(frozen=True, slots=True)
class CounterfactualCache:
    tokens: int
    basis: Basis

    @property
    def estimated(self) -> bool:
        return self.basis in ESTIMATED


def cacheable(tokens: int, cache: PromptCacheConfig) -> int:
    """What of a shared prefix of ``tokens`` the provider serves from cache."""
    if tokens < cache.min_prefix_tokens:
        return 0
    return tokens - tokens % cache.granularity


def from_conversation(
    previous: Seen, current: Chain, *, model: str, cache: PromptCacheConfig, now_ms: int
) -> CounterfactualCache:
    if previous.model != model or not previous.warm_at(now_ms):
        return CounterfactualCache(0, Basis.CONVERSATION_COLD)
    return CounterfactualCache(cacheable(previous.chain.shared_tokens(current), cache), Basis.CONVERSATION)


def from_share(share: float | None, prompt_tokens: int, cache: PromptCacheConfig) -> CounterfactualCache:
    if share is None:
        return CounterfactualCache(0, Basis.NONE)
    return CounterfactualCache(cacheable(int(share * prompt_tokens), cache), Basis.TENANT_SHARE)
