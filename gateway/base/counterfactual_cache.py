"""``CounterfactualCache``: the cached tokens a request forwarded unchanged would plausibly have had, and how
that was known (its ``Basis``). A value on the request's record, priced by the ledger's observer; worked out
from the conversation's cache state by ``gateway.conversations.counterfactual``.

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
- ``cache_hit``: answered from the gateway's response cache (``gateway.responsecache``), no upstream call:
  cost 0, and the usage the stored answer had, priced on the model that gave it, as the counterfactual.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


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
    CACHE_HIT = "cache_hit"


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
