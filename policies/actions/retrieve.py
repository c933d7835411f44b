"""``retrieve``: send the chunks of the documents most relevant to the question."""

from __future__ import annotations

from policies.context import Context
from policies.decision import Action, Decision


class RetrieveChunks:
    """Plan retrieval, preceded by compression of the old turns when history is the bulk of the prompt
    (``facts.history_share`` at least ``retrieve.compress_history_share``)."""

    def plan(self, context: Context) -> Decision:
        share = context.retrieve.compress_history_share
        if share is not None and context.facts.history_share >= share:
            return context.decision(Action.RETRIEVE, transforms=(Action.COMPRESS, Action.RETRIEVE))
        return context.decision(Action.RETRIEVE, transforms=(Action.RETRIEVE,))
