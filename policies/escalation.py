"""What happens after a transform: its result is checked, or its failure handled.

After a transform (``after_transform``), with ``t`` the tokens it produced and ``target`` its goal
(``compress.target_tokens`` or ``retrieve.budget_tokens``):

1. ``t <= target``, or a compression with ``t <= compress.accept_tokens`` (under the cliff: a compacted
   prefix reused turn after turn): send it (any transform still planned is dropped);
2. another transform is planned (compress, then retrieve): run it;
3. ``t`` is below the warning line: send it, with a warning that the target was missed;
4. the transform was compress and retrieve has not run: retrieve next;
5. ``t`` keeps the invariant: send it with a warning;
6. nothing more can cut it (exhausted): by the policy's ``on_exhausted``, ``forward`` sends it when it
   fits the model's window, with a warning, recorded above the cliff; else (``reject``, or over the
   window) reject with 400 ``context_length_exceeded``.

After a failure (``after_failure``), by the failed transform's ``on_failure``:
``reject`` answers 503; ``forward`` sends the request as it stands when the invariant allows it;
otherwise the next planned transform runs, or retrieve after a failed compress; when none is left, the
request is exhausted (6. above, the request as it stands), else 503. A failure that lies in the request
itself (``lasting``: retrieval finds no document to cut, or no room once the messages it must keep are
counted, or a transform that made the request larger) answers 400 ``context_length_exceeded`` instead of
503: the same request would fail the same way again, and clients retry a 503.

So a request that fits the model's window is never failed by the gateway's own transforms unless the
policy asks for it (``on_failure: reject``, ``on_exhausted: reject``).
"""

from __future__ import annotations

from dataclasses import replace

import policies.notices as notices
from policies.decision import Action, Decision, Rejection
from policies.facts import Facts
from policies.settings import Exhausted, Fallback


def after_transform(decision: Decision, facts: Facts, new_tokens: int) -> Decision:
    """The next decision once ``decision.transforms[0]`` has run and produced ``new_tokens``."""
    step, rest = _pending(decision)
    target = decision.compress.target_tokens if step is Action.COMPRESS else decision.retrieve.budget_tokens
    moved = replace(decision, tokens=new_tokens, applied=(*decision.applied, step), transforms=rest)
    if new_tokens <= target:
        return _send(moved)
    if (
        step is Action.COMPRESS
        and new_tokens <= decision.compress.accept_tokens
        and decision.bands.admits(new_tokens, allow_over_cliff=False)
    ):
        return _send(moved)  # a compacted prefix in use: sent as it is, never excerpted on top
    if rest:
        return moved
    missed = notices.above_target(step, new_tokens, target)
    if new_tokens < decision.bands.warning:
        return _send(moved, missed)
    if step is Action.COMPRESS and Action.RETRIEVE not in moved.applied:
        warning = notices.escalated(step, new_tokens, decision.bands, Action.RETRIEVE)
        return _plan_retrieve(moved, warning)
    if decision.bands.admits(new_tokens, allow_over_cliff=decision.allow_over_cliff):
        return _send(moved, missed)
    if _forwards_exhausted(moved):
        return _send(moved, missed, exhausted=True)
    why = f"{step} left {new_tokens} of {facts.prompt_tokens} input tokens"
    return _reject(
        moved, notices.too_long(bands=decision.bands, tokens=new_tokens, policy=decision.policy, why=why)
    )


def after_failure(decision: Decision, facts: Facts, *, reason: str, lasting: bool = False) -> Decision:
    """The next decision once ``decision.transforms[0]`` has failed (``reason``: for the warning;
    ``lasting``: the failure lies in the request, retrying it cannot help)."""
    step, rest = _pending(decision)
    fallback = decision.compress.on_failure if step is Action.COMPRESS else decision.retrieve.on_failure
    failed = replace(decision, transforms=rest)
    if fallback is Fallback.REJECT:
        return _reject(failed, _failure(decision, step, reason, lasting=lasting))
    if fallback is Fallback.FORWARD and decision.bands.admits(
        decision.tokens, allow_over_cliff=decision.allow_over_cliff
    ):
        warning = notices.transform_failed(step, reason, "sent as it stands")
        return _send(replace(failed, transforms=()), warning)
    if rest:
        warning = notices.transform_failed(step, reason, f"{rest[0]} next")
        return replace(failed, action=rest[-1], warnings=(*failed.warnings, warning))
    if step is Action.COMPRESS and Action.RETRIEVE not in decision.applied:
        return _plan_retrieve(failed, notices.transform_failed(step, reason, "retrieve next"))
    if _forwards_exhausted(failed):
        warning = notices.transform_failed(step, reason, "sent as it stands")
        return _send(failed, warning, exhausted=True)
    return _reject(failed, _failure(decision, step, reason, lasting=lasting))


def _forwards_exhausted(decision: Decision) -> bool:
    """Whether the policy sends a request no transform can cut further as it stands: ``on_exhausted:
    forward`` and it fits the model's window (over it the upstream would refuse it anyway)."""
    return decision.on_exhausted is Exhausted.FORWARD and decision.bands.admits(
        decision.tokens, allow_over_cliff=True
    )


def _failure(decision: Decision, step: Action, reason: str, *, lasting: bool) -> Rejection:
    """503 for a failure that may pass (a cheap model down); 400 for one in the request itself."""
    if lasting:
        why = notices.transform_failed(step, reason, "the request cannot be cut")
        return notices.too_long(bands=decision.bands, tokens=decision.tokens, policy=decision.policy, why=why)
    return notices.unavailable(step=step, reason=reason, policy=decision.policy)


def _pending(decision: Decision) -> tuple[Action, tuple[Action, ...]]:
    if not decision.transforms:
        raise ValueError("the decision has no transform pending")
    return decision.transforms[0], decision.transforms[1:]


def _reject(decision: Decision, rejection: Rejection) -> Decision:
    """Answer with ``rejection``: nothing more runs and nothing goes upstream."""
    return replace(decision, action=Action.REJECT, transforms=(), above_cliff=False, rejection=rejection)


def _plan_retrieve(decision: Decision, warning: str) -> Decision:
    warnings = (*decision.warnings, warning)
    return replace(decision, action=Action.RETRIEVE, transforms=(Action.RETRIEVE,), warnings=warnings)


def _send(decision: Decision, *warnings: str, exhausted: bool = False) -> Decision:
    """Send the request as it stands to ``decision.model`` (the caller checked the invariant, or found
    the request ``exhausted`` with a policy that forwards it then). Sent with no transform applied, it
    keeps no ``reason``: that said why a transform was planned, and none ran."""
    above = decision.tokens > decision.bands.cliff
    if above:
        why = "on_exhausted: forward, nothing left to cut" if exhausted else "allow_over_cliff"
        warnings = (*warnings, notices.above_cliff(decision.bands, decision.tokens, why))
    return replace(
        decision,
        action=decision.applied[-1] if decision.applied else Action.FORWARD,
        transforms=(),
        above_cliff=above,
        warnings=(*decision.warnings, *warnings),
        reason=decision.reason if decision.applied else None,
    )
