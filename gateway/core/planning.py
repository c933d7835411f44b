"""Steps 3, 4 and 6 of a chat request: count its tokens, ask the policy engine, run the transforms.

Counting is exact wherever it can change the decision. A body small enough to count in microseconds is
counted inline (per-message counts are cached, so a growing conversation costs only its new turn). A larger
body whose byte size proves it is below the warning line is decided on that bound, and counted exactly in a
worker thread while the upstream call runs (for the response headers and the ledger). Anything else is
counted before the decision, off the event loop when large.

A transform never makes the request larger: when what it returns counts more tokens than it received,
its input is kept and the policy treats the step as failed (lasting), so escalation moves on or sends
the request as it stands (``policies.escalation``).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import anyio.to_thread
import orjson

from gateway.base.errors import ContextLengthExceeded, GatewayError, PermissionDenied, ServiceUnavailable
from gateway.config.runtime import Route, Runtime
from gateway.core.front import CHAT, Front, TransformFailed
from gateway.tokens.counter import TokenCount, TokenCounter
from policies import Action, Decision, Facts, ModelBands, PolicyEngine, Rejection
from policies.facts import CacheFacts
from policies.margin import CountMargin

INLINE_COUNT_BYTES = 16 * 1024


class Transforms(Protocol):
    async def run(self, step: Action, messages: list[Any], decision: Decision, facts: Facts) -> list[Any]:
        """Return the transformed messages; raise TransformFailed when the transform cannot be done."""
        ...


@dataclass(slots=True)
class Plan:
    decision: Decision | None
    """None: the model is not under policy (not a chat model the engine knows)."""
    body: dict[str, Any]
    changed: bool = False
    """The messages were transformed; the body must be serialised again."""
    received_tokens: int | None = None
    forwarded_tokens: int | None = None
    confirmed_tokens: int | None = None
    """The provider's own count of the prompt (stored history included), when the gateway asked."""
    count: TokenCount | None = None
    sent_count: TokenCount | None = None
    """The count of the body as rewritten, when the transforms changed it."""
    front: Front = CHAT
    estimated: bool = False
    """The counts stand in for a tokenizer the gateway does not have (``estimated_counts``)."""
    _pending: Awaitable[TokenCount] | None = field(default=None, repr=False)

    async def received(self) -> int | None:
        """The exact token count of the request as received, waiting for the background count if any."""
        if self._pending is not None:
            self.count = await self._pending
            self._pending = None
            self.received_tokens = self.count.total
            if self.decision is not None and self.decision.action is Action.FORWARD and not self.changed:
                self.forwarded_tokens = self.count.total
        return self.received_tokens

    def messages(self) -> list[Any]:
        """The prompt as chat-style messages (for the background pre-compression)."""
        return self.front.messages(self.body)


@dataclass(frozen=True, slots=True)
class StoredHistory:
    """Input the upstream holds for the request (``previous_response_id``): counted, not transformable."""

    tokens: int
    """The estimated tokens of the stored history (previous input and output)."""
    reference: str
    """What names it in messages (the previous response id)."""


def with_model(raw: bytes, body: Mapping[str, Any], route: Route) -> bytes:
    """The body for ``route``: the original bytes when the route's upstream name is the one asked for."""
    if route.upstream_model == body["model"]:
        return raw
    return orjson.dumps({**body, "model": route.upstream_model})


def planned_body(raw: bytes, plan: Plan, route: Route, *, add_usage: bool = False) -> bytes:
    """The body to send to ``route``: the original bytes when nothing needs changing (opaque content goes
    on byte for byte), else the planned body serialised once more (JSON strings survive exactly);
    ``add_usage`` asks a chat stream for its usage chunk."""
    body = plan.body
    if not plan.changed and not add_usage:
        return with_model(raw, body, route)
    changed = {**body, "model": route.upstream_model}
    if add_usage:
        changed["stream_options"] = {**(body.get("stream_options") or {}), "include_usage": True}
    return orjson.dumps(changed)


async def plan_chat(
    runtime: Runtime,
    *,
    tenant: str,
    model: str,
    body: dict[str, Any],
    body_len: int,
    headers: Mapping[str, str],
    transforms: Transforms,
    admit: Callable[[int, Decision | None], Awaitable[None]],
    front: Front = CHAT,
    stored: StoredHistory | None = None,
    confirm: Callable[[], Awaitable[int | None]] | None = None,
    conversation: Callable[[TokenCount], Awaitable[CacheFacts | None]] | None = None,
    rejected: Callable[[Plan], None] | None = None,
    confirm_always: bool = False,
) -> Plan:
    """Count, decide, admit (``admit(tokens, decision)``: the budget hold, before any upstream call),
    transform.

    ``front`` adapts the body's shape (chat by default). ``stored``: history held upstream, added to
    the count for the decision; since it cannot be transformed, a decision to transform follows the
    policy's fallbacks (forward with a warning when the invariant allows, or over the cliff within the
    window under ``on_exhausted: forward``; else reject). ``confirm``: the provider's count of the whole
    prompt (stored history included), asked for when the count is near a line (the decision's ``margin``:
    ``confirm_within_tokens``, or for an estimated count its ``confirm_within_ratio``), the stored history
    is unknown, or always (``confirm_always``: a count the gateway can only estimate, on a provider set to
    confirm every one), and decided on. An estimated count near a line that is not confirmed (no
    ``confirm``, or no answer) is decided at the top of its error band, and so is a transformed request's
    estimate near a line: an undercount never crosses a line.
    ``conversation``: the cache state of the request's conversation, asked for a request counted at or
    above the line from which the engine weighs it (``conversation_from``: the warning line, or lower
    for a policy that compacts a growing conversation early); such a request is counted exactly first.
    ``rejected``: told of the plan (its decision a rejection, its prompt counted) before the rejection is
    raised as the error to answer.
    """
    engine, counter = runtime.engine, runtime.counter
    bands = engine.bands.get(model)
    if bands is None:
        await admit(front.upper_bound(counter, model, body, body_len), None)
        return Plan(decision=None, body=body, front=front)
    plan = Plan(decision=None, body=body, front=front)
    weigh_from = engine.conversation_from(model) or bands.warning
    estimated = plan.estimated = estimated_counts(front, counter, model)
    if body_len <= INLINE_COUNT_BYTES:
        plan.count = front.count(counter, model, body)
        tokens = plan.count.total
    else:
        bound = front.upper_bound(counter, model, body, body_len)
        extra = stored.tokens if stored is not None else 0
        # an estimate's error is under itself (``confirm_within_ratio`` < 1): twice the bound covers it
        if bound * (2 if estimated else 1) + extra < weigh_from:
            tokens = bound
            plan._pending = asyncio.ensure_future(anyio.to_thread.run_sync(front.count, counter, model, body))
        else:
            plan.count = await _count_async(runtime, front, model, body, body_len)
            tokens = plan.count.total
    if plan.count is not None:
        plan.received_tokens = plan.count.total
    tenant_config = runtime.config.tenants.get(tenant)
    cache, instruction = None, None
    if plan.count is not None and stored is None and tokens >= weigh_from:
        instruction = latest_instruction(front.messages(body))
        cache = await conversation(plan.count) if conversation is not None else None
    facts = Facts(
        tenant=tenant,
        model=model,
        prompt_tokens=tokens + (stored.tokens if stored is not None else 0),
        headers={name: value for name in engine.header_names if (value := headers.get(name)) is not None},
        tenant_allows_passthrough=bool(tenant_config and tenant_config.allow_passthrough),
        history_share=_history_share(plan.count),
        cache=cache,
        latest_instruction=instruction,
    )
    decision = engine.decide(facts)
    counted_tokens = facts.prompt_tokens
    unknown_history = stored is not None and stored.tokens == 0
    margin = decision.margin
    near = margin.near_line(bands, facts.prompt_tokens, estimated=estimated)
    if confirm is not None and (confirm_always or unknown_history or near):
        confirmed = await confirm()
        if confirmed is not None:
            plan.confirmed_tokens = confirmed
            if confirmed != facts.prompt_tokens:
                facts = replace(facts, prompt_tokens=confirmed)
                decision = engine.decide(facts)
    if plan.confirmed_tokens is None and estimated and near:
        own_band = decision.band
        facts = replace(facts, prompt_tokens=margin.top(facts.prompt_tokens, estimated=True))
        decision = engine.decide(facts)
        if decision.band is not own_band:
            decision = replace(decision, warnings=(*decision.warnings, margin.unconfirmed(counted_tokens)))
    if stored is not None:
        decision = _without_transforms(engine, decision, facts, stored)
    if decision.rejection is not None:
        raise _rejecting(plan, decision, rejected)
    await admit(facts.prompt_tokens, decision)
    messages: list[Any] = front.messages(body) if decision.transforms else []
    rebuilt: dict[str, Any] = body
    # the gateway's own count of what the next transform receives: it may return no more than that
    held = plan.count.total if plan.count is not None else decision.tokens
    while decision.transforms and decision.rejection is None:
        step = decision.transforms[0]
        try:
            produced = await transforms.run(step, messages, decision, facts)
            candidate = front.rebuild(body, produced)
        except TransformFailed as exc:
            decision = engine.after_failure(decision, facts, reason=str(exc), lasting=exc.lasting)
            continue
        counted = await _count_async(runtime, front, model, candidate, body_len)  # off the loop when large
        if counted.total > held:  # never send more than the transform received: keep its input
            reason = f"{step} made the request larger ({counted.total} of {held} tokens); its input is kept"
            decision = engine.after_failure(decision, facts, reason=reason, lasting=True)
            continue
        messages, rebuilt, held = produced, candidate, counted.total
        plan.changed = True
        plan.sent_count = counted
        decision = engine.after_transform(decision, facts, _safe(margin, bands, counted.total, estimated))
    if decision.rejection is not None:
        raise _rejecting(plan, decision, rejected)
    plan.decision = decision
    if plan.changed:
        plan.body = rebuilt
    if stored is not None:
        plan.forwarded_tokens = plan.received_tokens
    elif plan.changed and estimated and plan.sent_count is not None:
        plan.forwarded_tokens = plan.sent_count.total  # the estimate, not the top it was decided at
    elif not plan.changed and plan.confirmed_tokens is None and plan.count is not None:
        plan.forwarded_tokens = counted_tokens
    else:
        plan.forwarded_tokens = decision.tokens if (plan.changed or plan.count is not None) else None
    return plan


def estimated_counts(front: Front, counter: TokenCounter, model: str) -> bool:
    """Whether the gateway's counts for ``model`` on ``front`` stand in for a tokenizer it does not have
    (Messages: Claude's; any front: a model whose encoding is the configured default), so their error
    grows with the prompt (``policies.margin``)."""
    return front.approximate or counter.profile(model).approximate


def _safe(margin: CountMargin, bands: ModelBands, tokens: int, estimated: bool) -> int:
    """The count to check a transformed request on: an estimate near a line at the top of its band."""
    if estimated and margin.near_line(bands, tokens, estimated=True):
        return margin.top(tokens, estimated=True)
    return tokens


async def _count_async(
    runtime: Runtime, front: Front, model: str, body: Mapping[str, Any], body_len: int
) -> TokenCount:
    """``front.count``, in a worker thread for bodies of at least ``counting.offload_bytes``."""
    if body_len < runtime.config.counting.offload_bytes:
        return front.count(runtime.counter, model, body)
    return await anyio.to_thread.run_sync(functools.partial(front.count, runtime.counter, model, body))


def _without_transforms(
    engine: PolicyEngine, decision: Decision, facts: Facts, stored: StoredHistory
) -> Decision:
    """The decision once every planned transform has failed: the stored history cannot be changed."""
    reason = f"the history of {stored.reference} is stored upstream, out of the gateway's reach"
    while decision.transforms and decision.rejection is None:
        decision = engine.after_failure(decision, facts, reason=reason)
    if decision.rejection is not None and decision.rejection.status == 503:
        bands = decision.bands
        message = (
            f"This conversation's history is stored upstream ({stored.reference}); with this turn it is "
            f"estimated at {facts.prompt_tokens} input tokens, past the "
            f"{'price cliff' if facts.prompt_tokens > bands.cliff else 'warning line'} of {bands.model} "
            f"({bands.cliff if facts.prompt_tokens > bands.cliff else bands.warning} tokens; context window "
            f"{bands.window}), and the gateway cannot compress history it cannot see (policy "
            f"{decision.policy}). Start a new conversation, or send the history in `input` with "
            "`store: false` so that the gateway can compress it."
        )
        rejection = Rejection(
            status=400, error_type="invalid_request_error", code="context_length_exceeded", message=message
        )
        return replace(decision, rejection=rejection)
    return decision


def latest_instruction(messages: Sequence[Mapping[str, Any]]) -> str | None:
    """The text of the latest user message (its text parts joined), to recognise a client's own request
    to summarise the conversation."""
    for message in reversed(messages):
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            return content
        if isinstance(content, list):
            return " ".join(
                part["text"]
                for part in content
                if isinstance(part, Mapping) and isinstance(part.get("text"), str)
            )
        return None
    return None


def _history_share(count: TokenCount | None) -> float:
    """The share of the prompt outside its largest message: high for long chats, low for one document."""
    if count is None or not count.per_message or count.total <= 0:
        return 0.0
    return max(0.0, 1.0 - max(count.per_message) / count.total)


def _rejecting(plan: Plan, decision: Decision, rejected: Callable[[Plan], None] | None) -> GatewayError:
    plan.decision = decision
    if rejected is not None:
        rejected(plan)
    return _rejection_error(decision)


def _rejection_error(decision: Decision) -> GatewayError:
    rejection = decision.rejection
    assert rejection is not None
    error: GatewayError
    if rejection.status == 400:
        error = ContextLengthExceeded(rejection.message, param="messages", code=rejection.code)
    elif rejection.status == 503:
        error = ServiceUnavailable(rejection.message, code=rejection.code)
    else:
        error = PermissionDenied(rejection.message, code=rejection.code)
        error.status_code = rejection.status
    return error
