"""What a request would have used forwarded unchanged to the model it asked for: the counterfactual its cost
event is priced on (``gateway.core.metering``). Its own usage when that is what happened; else the prompt as
received, with the cached tokens it would plausibly have had, in the provider's units."""

from __future__ import annotations

from dataclasses import replace

from gateway.base.counterfactual_cache import Basis, CounterfactualCache
from gateway.base.record import RequestRecord
from gateway.base.types import Usage
from gateway.config.schema.root import GatewayConfig


def over_window(record: RequestRecord, config: GatewayConfig) -> bool:
    """Whether the prompt as received is larger than the context window of the model asked for: a request
    that could not have been sent unchanged, against which nothing was saved."""
    asked = config.models.get(record.routed_model or record.requested_model or "")
    return asked is not None and (record.prompt_tokens or 0) > asked.context_window


def counterfactual_usage(record: RequestRecord, usage: Usage) -> tuple[Usage, Basis]:
    """The usage forwarding the client's request unchanged to the model it asked for would have had:
    its own when that is what happened; else the prompt as received, with the cached tokens it would
    plausibly have had (``gateway.conversations.counterfactual``), and the same output."""
    if not record.transformed or record.prompt_tokens is None:
        rerouted = record.action == "reroute" and record.called_model != record.requested_model
        if rerouted:
            return usage, Basis.AS_SENT
        return lost_cache(record, usage) or (usage, Basis.FORWARDED)  # a fallback saves nothing
    guess = record.counterfactual or CounterfactualCache(0, Basis.NONE)
    received, scaled = unchanged_input(record, usage)
    cached, writes = in_units_of(record, received, guess.tokens, guess.writes)
    unchanged = Usage(
        input_tokens=received,
        cached_input_tokens=min(cached, received),
        cache_write_tokens=min(writes, received - min(cached, received)),
        output_tokens=usage.output_tokens,
        reasoning_tokens=usage.reasoning_tokens,
        estimated=usage.estimated or guess.estimated or scaled,
        tool_uses=usage.tool_uses,  # the request unchanged would have used its tools as much
    )
    return unchanged, guess.basis


def lost_cache(record: RequestRecord, usage: Usage) -> tuple[Usage, Basis] | None:
    """A request that went unchanged after the gateway had rewritten its conversation's previous request:
    the cached tokens it would have had had that one gone unchanged too, when more than it had (the
    saving, negative, is the loss the rewrite caused); None when the rewrite cost it nothing."""
    guess = record.counterfactual
    if guess is None or guess.basis is not Basis.CONVERSATION or guess.tokens <= usage.cached_input_tokens:
        return None
    if record.called_model != record.requested_model:  # a fallback answered: nothing to compare with
        return None
    cached, writes = in_units_of(record, usage.input_tokens, guess.tokens, guess.writes)
    if cached <= usage.cached_input_tokens:
        return None
    cached = min(cached, usage.input_tokens)
    writes = min(writes, usage.input_tokens - cached)
    return replace(usage, cached_input_tokens=cached, cache_write_tokens=writes), Basis.CONVERSATION_LOST


def in_units_of(record: RequestRecord, received: int, *counts: int) -> tuple[int, ...]:
    """``counts`` (of the conversation's fingerprints, on the gateway's own count) in the units of
    ``received`` (the provider's count of the prompt, when the gateway's is an estimate of it): a Claude
    prompt the gateway counts 194K and the provider 225K has 225/194 as many tokens cached."""
    prompt = record.prompt_tokens or 0
    if not record.counts_estimated or not prompt or received == prompt:
        return counts
    return tuple(round(count * received / prompt) for count in counts)


def unchanged_input(record: RequestRecord, usage: Usage) -> tuple[int, bool]:
    """The input tokens of the request as received, as the provider would have counted them, and
    whether that is an estimate. Exact counts are the gateway's own; an estimated count (Claude's) is
    replaced by the provider's count when the gateway asked for it, else scaled by how far the estimate
    of what was sent fell from the provider's count of it (what decides the tier the unchanged request
    would have hit: a 178K estimate the provider would have counted 207K is priced over the 200K tier)."""
    prompt = record.prompt_tokens or 0
    if not record.counts_estimated:
        return prompt, False
    if record.confirmed_tokens is not None:
        return record.confirmed_tokens, False
    sent = record.forwarded_tokens
    if usage.estimated or not sent or usage.input_tokens <= 0:
        return prompt, True
    return round(prompt * usage.input_tokens / sent), True
