"""Compaction below the warning line: when a growing conversation pays for it, and keeping it once made.

A self-compacting client (Codex CLI, Claude Code) compacts near its window, at about 240K, to a small
summary and its last turns, and grows back. A gateway that only compacts at its warning line does the
same, a turn later: no cheaper. What costs in a long chat is the history resent every turn, even cached
(a tenth of the input price, on hundreds of thousands of tokens); what a compaction costs is one rewrite
sent uncached and the cheap calls that read the pile. So with ``compress.compact_early`` (the deferred
timing's default), a warm conversation that grows turn after turn is compacted below the warning line:

- from the point where a compacted one would be extended (``policies.reuse``: the economic order
  quantity of the rewrite against the pile's cached price), never below the compaction target;
- when it pays within the turns the conversation can be expected to go on before its warning line (at
  most as many as it has had, at the growth observed: the larger of its last step and its mean step, so
  that an agent's small user turn between large tool rounds does not pass for slow growth): the
  compacted request uncached and the summary calls, against forwarding it with its cache, plus the
  cached price of the pile those turns no longer resend.

A conversation the gateway compacted keeps its compaction below the line too (its summary prefix is the
one the provider caches; forwarding the client's history would resend all of it uncached), so one
conversation keeps one strategy. The risk a compaction adds is told in its reason: a client that
branches back to a turn before it (edits an earlier message and regenerates) resends that history
uncached, since only the compacted prefix was kept warm. A compaction below the line that fails (the
cheap model down) sends the request as received: forwarding it keeps the invariant.
"""

from __future__ import annotations

from dataclasses import replace

from policies.bands import Band
from policies.context import Context
from policies.decision import Action, Decision
from policies.facts import CacheFacts, Strategy
from policies.prices import prices_of
from policies.reuse import compacted_size, reuse_limit
from policies.settings import Fallback

BRANCH_RISK = "a branch back to an earlier turn resends its history uncached"


def early_compaction(context: Context) -> Decision | None:
    """The compress decision for a below-warning request of a conversation to compact, else None."""
    settings, cache = context.compress, context.facts.cache
    if context.band is not Band.BELOW_WARNING or not settings.compact_early or cache is None:
        return None
    if not cache.warm or cache.strategy is Strategy.RETRIEVE:
        return None  # cold: nothing says it grows; excerpted: it keeps that strategy
    if cache.compacted:
        reason = "compressed below the warning line: the conversation's compacted prefix is kept"
    else:
        pays, comparison = pays_early(context, cache)
        if not pays:
            return None
        reason = f"compacted early: it pays ({comparison}); {BRANCH_RISK}"
    decision = context.decision(Action.COMPRESS, transforms=(Action.COMPRESS,))
    # below the line forwarding keeps the invariant: a compaction that fails sends the request as it is
    return replace(decision, reason=reason, compress=replace(decision.compress, on_failure=Fallback.FORWARD))


def pays_early(context: Context, cache: CacheFacts) -> tuple[bool, str]:
    """Whether compacting this warm, growing request now costs less than forwarding it over the turns
    it can be expected to go on below its warning line; and the comparison (USD)."""
    tokens = context.facts.prompt_tokens
    if not cache.growth_tokens or cache.growth_tokens <= 0:
        return False, "growth unknown"
    # an agent's small user turn between large tool rounds says little of how fast it grows
    growth = max(cache.growth_tokens, cache.mean_growth_tokens or 0)
    cache = replace(cache, growth_tokens=growth)
    settings, bands = context.compress, context.bands
    model = context.model_facts.get(bands.model)
    point = reuse_limit(settings, bands, model, cache)
    if point is None or tokens < point:
        return False, f"below the compaction point ({point})"
    prices = prices_of(context.model_facts, bands.model, settings.cheap_model)
    if prices is None:
        return False, "no prices"
    size = compacted_size(settings)
    turns = max(0, min((bands.warning - tokens) // growth, tokens // growth))
    forward = prices.sent(tokens, cache.cached_tokens)
    compress = prices.sent(size) + prices.summary(tokens - size)
    later = turns * max(0, tokens - size) * prices.cached
    comparison = (
        f"forward ${forward:.4f}, compress ${compress:.4f} with its summary calls, "
        f"{turns} later turns save ${later:.4f}"
    )
    return compress <= forward + later, comparison
