"""``retrieve``: send the chunks of the documents most relevant to the question."""

from __future__ import annotations

from dataclasses import replace

from policies.actions.compress import is_client_compaction
from policies.context import Context
from policies.decision import Action, Decision


class RetrieveChunks:
    """Plan retrieval, preceded by compression of the old turns when history is the bulk of the prompt
    (``facts.history_share`` at least ``retrieve.compress_history_share``) or the conversation is already
    compacted; a compression within ``compress.accept_tokens`` is then sent without retrieval, so a
    conversation never alternates between a compacted and an excerpted prefix.

    A client's own request to summarise the conversation is only compressed, never excerpted: the model
    writing the client's hand-off summary must see the gateway's summary and the recent turns, not
    passages picked for their relevance to the summary instructions."""

    def plan(self, context: Context) -> Decision:
        facts = context.facts
        if is_client_compaction(facts.latest_instruction, context.compress.client_compaction):
            decision = context.decision(Action.COMPRESS, transforms=(Action.COMPRESS,))
            return replace(decision, reason="client compaction: summary and recent turns, no excerpts")
        share = context.retrieve.compress_history_share
        compacted = facts.cache is not None and facts.cache.compacted
        if compacted or (share is not None and facts.history_share >= share):
            return context.decision(Action.RETRIEVE, transforms=(Action.COMPRESS, Action.RETRIEVE))
        return context.decision(Action.RETRIEVE, transforms=(Action.RETRIEVE,))
