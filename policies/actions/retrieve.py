"""``retrieve``: send the chunks of the documents most relevant to the question."""

from __future__ import annotations

from dataclasses import replace

from policies.actions.compress import is_client_compaction
from policies.actions.guard import cheaper_forwarded
from policies.context import Context
from policies.decision import Action, Decision
from policies.facts import CacheFacts, Strategy

MAX_SWITCHES = 2
"""Strategy changes a conversation may make; past them it keeps the one it has, warm or cold."""


class RetrieveChunks:
    """Plan retrieval, preceded by compression of the old turns when history is the bulk of the prompt
    (``facts.history_share`` at least ``retrieve.compress_history_share``) or the conversation is already
    compacted; a compression within ``compress.accept_tokens`` is then sent without retrieval, so a
    conversation never alternates between a compacted and an excerpted prefix.

    One conversation keeps one strategy (``kept_strategy``): compacted, it is compressed first whatever
    its history share; excerpted only, it is retrieved again while warm, even when history is the bulk.
    Each switch re-writes the prefix the provider caches (100K tokens and more past the cliff). With
    ``allow_over_cliff``, a warm request whose transform would cost more than forwarding it at the tier
    is forwarded (``guard``).

    A client's own request to summarise the conversation is only compressed, never excerpted: the model
    writing the client's hand-off summary must see the gateway's summary and the recent turns, not
    passages picked for their relevance to the summary instructions."""

    def plan(self, context: Context) -> Decision:
        facts = context.facts
        if is_client_compaction(facts.latest_instruction, context.compress.client_compaction):
            decision = context.decision(Action.COMPRESS, transforms=(Action.COMPRESS,))
            return replace(decision, reason="client compaction: summary and recent turns, no excerpts")
        kept = kept_strategy(facts.cache)
        share = context.retrieve.compress_history_share
        compress_first = kept is Strategy.COMPRESS or (
            kept is None and share is not None and facts.history_share >= share
        )
        forwarded = cheaper_forwarded(context, compress_first=compress_first)
        if forwarded is not None:
            return forwarded
        if compress_first:
            return context.decision(Action.RETRIEVE, transforms=(Action.COMPRESS, Action.RETRIEVE))
        decision = context.decision(Action.RETRIEVE, transforms=(Action.RETRIEVE,))
        if kept is Strategy.RETRIEVE:
            return replace(decision, reason="retrieved: the conversation keeps its excerpted prefix")
        return decision


def kept_strategy(cache: CacheFacts | None) -> Strategy | None:
    """The strategy a conversation keeps: the one the gateway last cut it with, while its cache is warm
    (switching would re-write the cached prefix) or once it has switched ``MAX_SWITCHES`` times; None:
    choose afresh (never cut, or cold with switches left: a switch re-writes nothing cached)."""
    if cache is None:
        return None
    if cache.compacted:
        return Strategy.COMPRESS
    if cache.strategy is not None and (cache.warm or cache.switches >= MAX_SWITCHES):
        return cache.strategy
    return None
