"""Step 8: what each request cost, as cost events for the ledger, and the budget hold taken before it.

One event per upstream call: the request's own (id = request id), and one per side call (summaries,
embeddings: ``<rid>:summary:1``, parent = the request). The request's event carries the counterfactual:
what forwarding the client's request unchanged to the model it asked for would have cost, at the tier that
request would have hit. Side events carry none, so the saving summed over a request's events is net of what
its compression cost.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import structlog

from gateway.base.counterfactual_cache import Basis, CounterfactualCache
from gateway.base.money import nanos_from_usd, usd
from gateway.base.record import CACHE_HIT, SHADOW_CALL, TIMEOUT, Note, RequestRecord, SideCall
from gateway.base.types import Usage
from gateway.config.schema.root import GatewayConfig, ModelConfig, ModelPricing, prompt_cache_of
from gateway.core.unchanged import counterfactual_usage, over_window
from gateway.ledger import CostEvent, Ledger
from gateway.money.pricing import Cost, price
from gateway.servertools import uses_text
from gateway.servertools.requested import NO_TOOLS, RequestedTools
from gateway.tokens.counter import TokenCounter

log = structlog.get_logger("gateway.metering")

DEFAULT_MAX_OUTPUT_TOKENS = 4_096


def max_cost_nanos(
    model: ModelConfig | None,
    input_tokens: int,
    body: Mapping[str, Any],
    *,
    output: bool = True,
    tools: RequestedTools = NO_TOOLS,
) -> int:
    """The most a request can cost: its input, plus its output cap (``max_completion_tokens`` /
    ``max_tokens``, else the model's ``max_output_tokens``, else 4,096) for each of its ``n`` choices, at
    the tier that input hits, plus the most its server-side ``tools`` can cost. ``output=False``: a call
    that produces no tokens (embeddings)."""
    if model is None or model.pricing is None:
        return 0
    produced = 0
    if output and model.kind != "embedding":
        cap = _positive_int(body.get("max_completion_tokens")) or _positive_int(body.get("max_tokens"))
        per_choice = cap or model.max_output_tokens or DEFAULT_MAX_OUTPUT_TOKENS
        produced = per_choice * (_positive_int(body.get("n")) or 1)
    tokens = price(Usage(input_tokens=input_tokens, output_tokens=produced), model.pricing).total_nanos
    return tokens + (held_tool_nanos(model.pricing, tools) if tools else 0)


def held_tool_nanos(pricing: ModelPricing, tools: RequestedTools) -> int:
    """The most ``tools`` can cost at ``pricing``'s ``per_use`` prices: each kind's most uses times its
    price; under a cap on all calls together (``max_tool_calls``), that many calls of the dearest kind
    offered, when that is less."""
    prices = {kind: nanos_from_usd(pricing.per_use.get(kind, 0)) for kind in tools.kinds}
    each = sum(count * prices[kind] for kind, count in tools.held)
    if tools.total is None:
        return each
    return min(each, tools.total * max(prices.values(), default=0))


def _positive_int(value: object) -> int | None:
    return value if type(value) is int and value > 0 else None


MAIN_CALL = "request"
"""The kind of a request's own upstream call (side calls carry theirs: summary, embeddings)."""

EventSink = Callable[[CostEvent, str], None]
"""Also told of every event with its kind (the metrics count them), so a request is priced once."""


Money = tuple[Cost | None, Usage, Basis, int]
"""A call's cost, the usage forwarding it unchanged would have had, how that was known, and what that
would have cost (``LedgerRecorder.money``)."""


@dataclass(frozen=True, slots=True)
class Priced:
    """What a request was priced at, and with what (``LedgerRecorder.priced``)."""

    usage: Usage
    config: GatewayConfig
    counterfactual: CounterfactualCache | None
    money: Money


PRICED: Note[Priced] = Note("priced")


class LedgerRecorder:
    """An observer (runs after the response): turns a finished request into cost events, and sets the
    record's ``cost_nanos`` to their sum (observers that run after it, the log line, read it), and, for a
    traced request, ``saving_nanos`` (its span shows it)."""

    def __init__(
        self,
        ledger: Ledger,
        *,
        config: Callable[[], GatewayConfig],
        counter: Callable[[], TokenCounter],
        sinks: Sequence[EventSink] = (),
    ) -> None:
        self._ledger = ledger
        self._config = config
        self._counter = counter
        self.sinks = list(sinks)
        self._unpriced: set[tuple[str, str]] = set()

    def __call__(self, record: RequestRecord) -> None:
        events = self.events(record)
        for event, kind in events:
            self._ledger.record(event)
            for sink in self.sinks:
                sink(event, kind)
        if events:
            record.cost_nanos = sum(event.cost_nanos for event, _ in events)
            if record.attempt_log is not None:  # traced (``gateway.telemetry``): its span shows the saving
                record.saving_nanos = sum(event.saving_nanos for event, _ in events)

    def events(self, record: RequestRecord) -> list[tuple[CostEvent, str]]:
        """The request's own event (when it reached a model; for a background response still running, when
        it ends: ``gateway.fronts.responses.pending``) and one per side call, with their kinds."""
        if record.tenant is None:
            return []
        config = self._config()
        tenant = record.bill_tenant or record.tenant.name
        events = []
        if record.called_model is not None and record.pending_response is None:
            kind = SHADOW_CALL if record.endpoint == SHADOW_CALL else MAIN_CALL
            events.append((self.main_event(record, config, tenant), kind))
        kinds: Counter[str] = Counter()
        for call in record.side_calls:
            kinds[call.kind] += 1
            events.append((self.side_event(record, call, config, tenant, kinds[call.kind]), call.kind))
        return events

    def cost_headers(self, record: RequestRecord) -> dict[str, str]:
        """What the request cost, for its answer's headers: ``x-gateway-cost-usd`` (its call and the side
        calls made for it so far), ``x-gateway-saving-usd`` against forwarding it unchanged, with
        ``x-gateway-saving-basis``; ``x-gateway-cost-estimated: true`` when the usage is not the
        provider's yet (a stream's headers go before its usage: the input priced with no cache known
        but the conversation's, no output). Empty before a model was called or when it has no price."""
        if record.tenant is None or record.called_model is None or record.pending_response is not None:
            return {}
        config = self._config()
        if record.action == CACHE_HIT:
            saved = hit_counterfactual(record, config)
            return {
                "x-gateway-cost-usd": usd(0, trim=True),
                "x-gateway-saving-usd": usd(saved, trim=True),
                "x-gateway-saving-basis": Basis.CACHE_HIT.value,
            }
        usage = with_tool_uses(record, record.usage or self.early_estimate(record))
        cost, _, basis, counterfactual = self.priced(record, config, usage)
        if cost is None:
            return {}
        total = cost.total_nanos + record.flat_cost_nanos + side_calls_nanos(config, record)
        estimated = usage.estimated or any(call.usage is None for call in record.side_calls)
        saving = counterfactual + record.flat_cost_nanos - total
        out = {
            "x-gateway-cost-usd": usd(total, trim=True),
            "x-gateway-saving-usd": usd(saving, trim=True),
            "x-gateway-saving-basis": basis.value,
        }
        if estimated:
            out["x-gateway-cost-estimated"] = "true"
        return out

    def early_estimate(self, record: RequestRecord) -> Usage:
        """The usage of a call whose answer has not said it yet: what was sent, cached as the
        conversation's cache says when it went unchanged (none known otherwise), no output."""
        sent = record.forwarded_tokens or record.prompt_tokens or 0
        guess = record.counterfactual
        cached = guess.tokens if guess is not None and not record.transformed else 0
        return Usage(
            input_tokens=sent, cached_input_tokens=min(cached, sent), output_tokens=0, estimated=True
        )

    def priced(self, record: RequestRecord, config: GatewayConfig, usage: Usage) -> Money:
        """``money``, once per request: the answer's headers price it, and its cost event again with the
        same usage (the same object), config and counterfactual, which then reads the headers' figures."""
        known = record.note(PRICED)
        if (
            known is not None
            and known.usage is usage
            and known.config is config
            and known.counterfactual is record.counterfactual
        ):
            return known.money
        money = self.money(record, config, usage)
        record.put(PRICED, Priced(usage, config, record.counterfactual, money))
        return money

    def money(self, record: RequestRecord, config: GatewayConfig, usage: Usage) -> Money:
        """The call's cost, the usage forwarding it unchanged would have had, how that was known, and
        what it would have cost (``counterfactual_nanos`` less any flat price)."""
        model = record.called_model or ""
        cost = cost_of(usage, config, model)
        unchanged, basis = counterfactual_usage(record, usage)
        if basis is not Basis.FORWARDED and over_window(record, config):
            unchanged, basis = usage, Basis.OVER_WINDOW
        counterfactual = cost.total_nanos if cost else 0
        if basis not in (Basis.FORWARDED, Basis.OVER_WINDOW):
            priced = cost_of(unchanged, config, record.routed_model or record.requested_model or "")
            counterfactual = priced.total_nanos if priced is not None else counterfactual
        return cost, unchanged, basis, counterfactual

    def main_event(self, record: RequestRecord, config: GatewayConfig, tenant: str) -> CostEvent:
        assert record.tenant is not None and record.called_model is not None
        if record.action == CACHE_HIT:
            return self.hit_event(record, config, tenant)
        usage = with_tool_uses(record, record.usage or self.estimate(record))
        cost, unchanged, basis, counterfactual = self.priced(record, config, usage)
        if cost is not None and cost.unpriced_tools:
            self.unpriced(record.called_model, cost.unpriced_tools)
        fields = _priced(usage, cost)
        fields["cost_nanos"] += record.flat_cost_nanos
        fields["estimated"] = usage.estimated or unchanged.estimated  # the saving is an estimate too
        return CostEvent(
            **_request_fields(record, tenant),
            action=record.action,
            parent_id=record.parent_id,
            counterfactual_nanos=counterfactual + record.flat_cost_nanos,
            counterfactual_cached_tokens=unchanged.cached_input_tokens,
            counterfactual_basis=basis.value,
            reason=record.reason,
            conversation=record.conversation,
            band=record.band,
            prompt_tokens=record.prompt_tokens,
            retries=record.retries,
            upstream_ms=_ms(record.upstream_seconds),
            first_token_ms=_ms(record.first_token_seconds),
            **fields,
        )

    def hit_event(self, record: RequestRecord, config: GatewayConfig, tenant: str) -> CostEvent:
        """A request answered from the response cache: no tokens used, cost 0, and what the stored
        answer's usage costs on the model that gave it as the counterfactual (its saving)."""
        assert record.tenant is not None and record.called_model is not None
        return CostEvent(
            **_request_fields(record, tenant),
            action=CACHE_HIT,
            counterfactual_nanos=hit_counterfactual(record, config),
            counterfactual_basis=Basis.CACHE_HIT.value,
        )

    def side_event(
        self, record: RequestRecord, call: SideCall, config: GatewayConfig, tenant: str, n: int
    ) -> CostEvent:
        assert record.tenant is not None
        usage = side_usage(record, call)
        return CostEvent(
            id=f"{record.request_id}:{call.kind}:{n}",
            time_ms=int(time.time() * 1000),
            tenant=tenant,
            key_id=record.tenant.key_id,
            requested_model=call.model,
            model=call.model,
            provider=call.provider,
            action=call.kind,
            parent_id=record.parent_id or record.request_id,
            status=call.status,
            latency_ms=int(call.seconds * 1000),
            client_request_id=record.client_request_id,
            tags=record.tags,
            **_priced(usage, cost_of(usage, config, call.model)),
        )

    def unpriced(self, model: str, kinds: tuple[str, ...]) -> None:
        """Tool uses the model has no price for: billed $0, so said once per model and kind in the log
        (the metrics count every such use: ``gateway_tool_uses_total{priced="false"}``)."""
        for kind in kinds:
            if (model, kind) not in self._unpriced:
                self._unpriced.add((model, kind))
                log.warning(
                    "tool_use_unpriced",
                    model=model,
                    kind=kind,
                    hint=f"set models.{model}.pricing.per_use.{kind} (USD per use)",
                )

    def estimate(self, record: RequestRecord) -> Usage:
        """No usage from the upstream (a stream cut short): the tokens the gateway sent and relayed."""
        model = record.called_model or ""
        output = self._counter().count_text(model, record.output_text) if record.output_text else 0
        return Usage(
            input_tokens=record.forwarded_tokens or record.prompt_tokens or 0,
            output_tokens=output,
            estimated=True,
        )


def hit_counterfactual(record: RequestRecord, config: GatewayConfig) -> int:
    """What forwarding a request answered from the response cache would have cost: the usage its stored
    answer had, at the prices of the model that gave it (0 without prices)."""
    if record.usage is None or record.called_model is None:
        return 0
    cost = cost_of(record.usage, config, record.called_model)
    return cost.total_nanos if cost is not None else 0


def with_tool_uses(record: RequestRecord, usage: Usage) -> Usage:
    """``usage`` with the server-side tool uses seen in the answer (``RequestRecord.tool_uses``) when it
    carries none itself: the headers and the event bill them alike."""
    if record.tool_uses and not usage.tool_uses:
        return replace(usage, tool_uses=record.tool_uses)
    return usage


def side_usage(record: RequestRecord, call: SideCall) -> Usage:
    """What a side call used: its usage; without one, estimated: for an attempt that timed out, the
    prompt it sent (the provider may have run it), else nothing."""
    if call.usage is not None:
        return call.usage
    sent = (record.forwarded_tokens or record.prompt_tokens or 0) if call.kind == TIMEOUT else 0
    return Usage(input_tokens=sent, estimated=True)


def side_calls_nanos(config: GatewayConfig, record: RequestRecord) -> int:
    """What a record's side calls cost, as their cost events price them, at the prices of the models
    that answered them."""
    costs = (cost_of(side_usage(record, call), config, call.model) for call in record.side_calls)
    return sum(cost.total_nanos for cost in costs if cost is not None)


def cost_of(usage: Usage, config: GatewayConfig, model: str) -> Cost | None:
    """The price of ``usage`` on ``model`` (cache writes as its prompt cache bills them); None when the
    config gives the model no prices."""
    found = config.models.get(model)
    if found is None or found.pricing is None:
        return None
    return price(usage, found.pricing, write_multiplier=prompt_cache_of(config, model).write_multiplier)


def _request_fields(record: RequestRecord, tenant: str) -> dict[str, Any]:
    """What a request's own event says of the request, however it was answered."""
    assert record.tenant is not None and record.called_model is not None
    return {
        "id": record.request_id,
        "time_ms": int(record.started_at * 1000),
        "tenant": tenant,
        "key_id": record.tenant.key_id,
        "requested_model": record.requested_model or record.called_model,
        "model": record.called_model,
        "provider": record.provider or "",
        "status": record.status,
        "latency_ms": int((record.total_seconds or 0) * 1000),
        "stream": record.stream,
        "client_request_id": record.client_request_id,
        "tags": record.tags,
    }


def _priced(usage: Usage, cost: Cost | None) -> dict[str, Any]:
    """The token and money fields a cost event takes from a usage and its price."""
    return {
        "input_tokens": usage.input_tokens,
        "cached_tokens": usage.cached_input_tokens,
        "output_tokens": usage.output_tokens,
        "reasoning_tokens": usage.reasoning_tokens,
        "cache_write_tokens": usage.cache_write_tokens,
        "tier": None if cost is None or cost.tier is None else f"tier{cost.tier}",
        "cost_nanos": cost.total_nanos if cost else 0,
        "estimated": usage.estimated,
        "tool_uses": uses_text(usage.tool_uses),
        "tool_cost_nanos": cost.tool_nanos if cost else 0,
        "cost_parts": None if cost is None else cost.parts,
    }


def _ms(seconds: float | None) -> int | None:
    return None if seconds is None else int(seconds * 1000)
