"""``reject``: answer with an error instead of calling any model."""

from __future__ import annotations

import policies.notices as notices
from policies.bands import Band
from policies.context import Context
from policies.decision import Action, Decision


class RejectRequest:
    """400 ``context_length_exceeded`` with the numbers from the warning line up; 403 below it."""

    def plan(self, context: Context) -> Decision:
        bands, tokens, policy = context.bands, context.tokens, context.policy.name
        if context.band is Band.BELOW_WARNING:
            rejection = notices.refused(bands=bands, tokens=tokens, policy=policy)
        else:
            why = f"requests in the {context.band} band are rejected"
            rejection = notices.too_long(bands=bands, tokens=tokens, policy=policy, why=why)
        return context.decision(Action.REJECT, rejection=rejection)
