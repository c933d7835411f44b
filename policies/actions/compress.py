"""``compress``: summarise the old turns through the cheap model, keep the recent ones verbatim."""

from __future__ import annotations

from policies.context import Context
from policies.decision import Action, Decision


class CompressOldTurns:
    """Plan one compression; ``after_transform`` checks its result against ``compress.target_tokens``."""

    def plan(self, context: Context) -> Decision:
        return context.decision(Action.COMPRESS, transforms=(Action.COMPRESS,))
