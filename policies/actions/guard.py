"""Over the cliff, with ``allow_over_cliff``: forward at the tier when that costs less than the transform.

A policy that allows requests over the cliff accepts the higher tier; its over-cliff action still cuts
the request, which usually pays. It does not when the transform re-writes what the provider caches: a
warm conversation over the cliff, forwarded, is served mostly from the cache even at twice the price,
while a fresh compaction sends its prefix uncached and pays the cheap calls that summarise the rest (a
retrieval, its excerpts uncached). A turn never costs more than forwarding it unchanged at its tier, so
such a request is forwarded deliberately, with the above-cliff warning (the tier is recorded on its
event) and the comparison as its reason. Without ``allow_over_cliff`` the invariant wins: nothing goes
over the cliff, whatever it costs.
"""

from __future__ import annotations

from dataclasses import replace

from policies.bands import Band
from policies.context import Context
from policies.decision import Action, Decision
from policies.facts import Strategy
from policies.prices import prices_of
from policies.reuse import compacted_size


def cheaper_forwarded(context: Context, *, compress_first: bool) -> Decision | None:
    """The forward decision of an over-cliff request whose planned transform (compression first or
    not) is expected to cost more than forwarding it at the tier with its warm cache, else None."""
    facts, bands, policy = context.facts, context.bands, context.policy
    cache = facts.cache
    if context.band is not Band.OVER_CLIFF or not policy.allow_over_cliff or cache is None or not cache.warm:
        return None
    if not bands.admits(facts.prompt_tokens, allow_over_cliff=True):
        return None
    model = context.model_facts.get(bands.model)
    prices = prices_of(context.model_facts, bands.model, context.compress.cheap_model)
    if model is None or prices is None:
        return None
    tokens = facts.prompt_tokens
    cached = min(cache.cached_tokens, tokens)
    forward = (tokens - cached) * prices.input * model.tier_input_multiplier + (
        cached * prices.cached * model.tier_cached_multiplier
    )
    if cache.compacted:
        held = cache.cached_tokens
        transform = prices.sent(held + (cache.growth_tokens or 0), held)  # the compacted prefix reused
    elif compress_first or cache.strategy is Strategy.COMPRESS:
        size = compacted_size(context.compress)
        transform = prices.sent(size) + prices.summary(tokens - size)
    else:
        transform = prices.sent(context.retrieve.budget_tokens)
    if forward >= transform:
        return None
    decision = context.decision(Action.FORWARD)
    reason = (
        f"forwarded over the cliff (allow_over_cliff): at the tier ${forward:.4f} with its cache, "
        f"its transform ${transform:.4f}"
    )
    return replace(decision, reason=reason)
