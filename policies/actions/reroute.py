"""``reroute``: send the request unchanged to another model (e.g. a cheap long-context one)."""

from __future__ import annotations

import policies.notices as notices
from policies.actions.retrieve import RetrieveChunks
from policies.context import Context
from policies.decision import Action, Decision
from policies.settings import Fallback


class RerouteToModel:
    """Reroute when the target takes the request under the invariant; else the policy's
    ``compress.on_failure``: forward to the requested model if it may take the request unchanged
    (else retrieve), retrieve, or reject with 400 ``context_length_exceeded``."""

    def plan(self, context: Context) -> Decision:
        assert context.policy.reroute_model is not None, "validated: a reroute action has a reroute model"
        target = context.models[context.policy.reroute_model]
        allow = context.policy.allow_over_cliff
        if target.admits(context.tokens, allow_over_cliff=allow):
            return context.decision(Action.REROUTE, target=target)
        fallback = context.compress.on_failure
        if fallback is Fallback.REJECT:
            why = f"reroute target {target.model} cannot take the request"
            policy = context.policy.name
            rejection = notices.too_long(bands=target, tokens=context.tokens, policy=policy, why=why)
            return context.decision(Action.REJECT, target=target, rejection=rejection)
        if fallback is Fallback.FORWARD and context.bands.admits(context.tokens, allow_over_cliff=allow):
            warning = notices.cannot_reroute(target, context.tokens, f"forwarded to {context.bands.model}")
            return context.warned(warning).decision(Action.FORWARD)
        warning = notices.cannot_reroute(target, context.tokens, "retrieve")
        return RetrieveChunks().plan(context.warned(warning))
