"""``forward``: send the request unchanged to the requested model."""

from __future__ import annotations

import policies.notices as notices
from policies.actions.early import early_compaction
from policies.actions.retrieve import RetrieveChunks
from policies.context import Context
from policies.decision import Action, Decision


class ForwardUnchanged:
    """Forward as received; a request the invariant forbids to forward is retrieved instead; a growing
    conversation below the warning line is compacted when that pays, and kept compacted (``early``).

    A validated config never asks to forward above the cliff without ``allow_over_cliff``, nor above
    the window; the check stays as a guard for configs built by other means.
    """

    def plan(self, context: Context) -> Decision:
        early = early_compaction(context)
        if early is not None:
            return early
        if context.bands.admits(context.tokens, allow_over_cliff=context.policy.allow_over_cliff):
            return context.decision(Action.FORWARD)
        return RetrieveChunks().plan(context.warned(notices.cannot_forward(context.bands, context.tokens)))
