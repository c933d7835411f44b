"""``compress``: summarise the old turns through the cheap model, keep the recent ones verbatim.

In the warning band the cache decides when (``compress.timing: deferred``, the default). A prompt the
provider serves mostly from its cache costs a tenth of its input price, and any rewrite throws that cache
away, so while the request stays under the cliff:

- a client's own request to summarise the conversation is forwarded unchanged (its model must see
  everything it is asked to summarise);
- a conversation already compacted keeps its compacted prefix (the compressor reuses it byte for byte);
- a conversation whose cache is warm is compressed now only when that pays (``pays_now``): the compacted
  request, all uncached, plus the cheap calls (reading what they summarise, writing their summaries),
  against forwarding it with its cache plus what the turns left before the cliff (at the growth
  observed) save on a smaller history;
- otherwise it is forwarded unchanged, with the warning, and its summary is prepared in the background
  when the next turn, at the growth observed, would cross the cliff (so that the crossing finds it
  ready) and the conversation's pre-compression spend stays within ``compress.precompress_max_usd``;
  never on a guess (unknown growth: a branch, another model), since a prepared summary is spent whether
  or not the crossing comes;
- a conversation whose cache has gone cold (idle past the retention), or that the gateway does not know,
  is compressed now: the rewrite costs nothing the cache would have saved.

``timing: eager`` compresses every warning-band request, as before the cache was counted. Over the cliff,
compression is planned by ``retrieve`` (old turns first when history is the bulk of the prompt).
"""

from __future__ import annotations

from dataclasses import replace

from policies.bands import Band
from policies.context import Context
from policies.decision import Action, Decision
from policies.facts import CacheFacts
from policies.prices import prices_of
from policies.reuse import compacted_size
from policies.settings import Timing


def is_client_compaction(text: str | None, phrases: tuple[str, ...]) -> bool:
    """Whether the latest instruction asks the model to summarise the conversation itself."""
    if not text or not phrases:
        return False
    lowered = text.lower()
    return any(phrase in lowered for phrase in phrases)


class CompressOldTurns:
    """Plan one compression; ``after_transform`` checks its result against ``compress.accept_tokens``."""

    def plan(self, context: Context) -> Decision:
        if context.band is Band.WARNING and context.compress.timing is Timing.DEFERRED:
            deferred = _deferred(context)
            if deferred is not None:
                return deferred
        reason = _reason_to_compress(context)
        decision = context.decision(Action.COMPRESS, transforms=(Action.COMPRESS,))
        return replace(decision, reason=reason) if reason else decision


def pays_now(context: Context, cache: CacheFacts) -> tuple[bool, str]:
    """Whether compressing this warm request costs less than forwarding it, counting the cheaper history
    of the turns left before the cliff; and the comparison, for the reason (USD per request).

    The compression is the compacted request, uncached, and the cheap calls that summarise the rest
    (reading it and writing a summary per call, ``policies.prices``). When the next turn would cross the
    cliff, forwarding spends them too (the summary is prepared for the crossing): they are then counted
    on both sides, and shown."""
    prices = prices_of(context.model_facts, context.bands.model, context.compress.cheap_model)
    if prices is None:
        return False, "no prices"
    tokens = context.facts.prompt_tokens
    size = compacted_size(context.compress)
    forward = prices.sent(tokens, cache.cached_tokens)
    growth = cache.growth_tokens
    turns = max(0, (context.bands.cliff - tokens) // growth) if growth else 0
    summary = prices.summary(tokens - size)
    compress = prices.sent(size) + summary
    if _crossing(context, cache):
        forward += summary
    later = turns * max(0, tokens - size) * prices.cached
    comparison = (
        f"forward ${forward:.4f}, compress ${compress:.4f} with summary calls of ${summary:.4f}"
        f"{' (spent either way: the next turn crosses)' if _crossing(context, cache) else ''}, "
        f"{max(0, turns)} later turns save ${later:.4f}"
    )
    return compress <= forward + later, comparison


def _deferred(context: Context) -> Decision | None:
    """The forward decision of a warning-band request the cache says to leave alone, else None."""
    facts, settings = context.facts, context.compress
    if is_client_compaction(facts.latest_instruction, settings.client_compaction):
        forward = context.decision(Action.FORWARD)
        return replace(forward, reason="client compaction: forwarded unchanged under the cliff")
    cache = facts.cache
    if cache is None or not cache.warm or cache.compacted:
        return None
    pays, _ = pays_now(context, cache)
    if pays:
        return None
    forward = context.decision(Action.FORWARD)
    reason = f"deferred: cache warm ({cache.cached_tokens} tokens cached), under the cliff"
    if cache.growth_tokens is None or not _crossing(context, cache):
        return replace(forward, reason=reason)
    if not context.precompress_fits():
        reason += "; summary not prepared: the conversation's pre-compression spend is at its cap"
        return replace(forward, reason=reason)
    return replace(forward, precompress=True, reason=reason + "; summary prepared for the crossing")


def _crossing(context: Context, cache: CacheFacts) -> bool:
    """The next turn, at the growth observed, would cross the cliff (unknown growth: assume it would)."""
    growth = cache.growth_tokens
    return growth is None or context.facts.prompt_tokens + growth > context.bands.cliff


def _reason_to_compress(context: Context) -> str | None:
    if context.band is not Band.WARNING or context.compress.timing is not Timing.DEFERRED:
        return None
    cache = context.facts.cache
    if cache is None:
        return "compressed: no warm cache known for this conversation (new, or idle past the retention)"
    if cache.compacted:
        return "compressed: the conversation's compacted prefix is reused"
    if cache.warm:
        return f"compressed: it pays now ({pays_now(context, cache)[1]})"
    return "compressed: the cache has gone cold, the rewrite costs nothing extra"
