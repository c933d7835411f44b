"""Replay: the recorded traffic of a period re-decided and re-priced under a candidate config.

Each request's cost event carries what replay needs and no prompt text: the prompt's count as received,
the model asked for and the one called, the action taken, the usage billed, the cached tokens forwarding it
unchanged would have had (the counterfactual's, from the conversation's trace), and its side calls by
parent id. Per request, the candidate's policy engine decides again on that count (as for a request
without headers, and without the conversation's cache state: where the cache made the recorded choice in
the warning band and the candidate puts the prompt in the same band, that choice is kept), and the result
is priced with the candidate's prices:

- the same action on the same model as recorded: the recorded usage, re-priced (exact);
- forwarded unchanged or rerouted: the prompt as received, with the cached tokens the counterfactual
  had (the model asked for) or none (another model), and the recorded output;
- a transform that did not happen (compress, retrieve): the forwarded size is modelled (the summary's
  exact length cannot be known) as the share of the prompt the period's recorded transforms of that kind
  sent on, at most the policy's target (its target when none was recorded), cold, with side-call spend at
  the period's recorded rate per token cut (else the cheap model reading the tokens cut and writing 2% of
  them); what the period's transforms did is learnt in a first pass over it (``gateway.analysis.learnt``);
- rejected: nothing spent.

What cannot be replayed (failed calls, embeddings and passthrough, events recorded before the prompt's
count was kept that were not forwarded unchanged, experiments' calls) is carried over as recorded,
re-priced, and counted. Every assumption made is counted in ``uncertainty`` with its reason.

Memory is constant: sums per tenant, model, band and action, and a bounded map of recent request ids
(their side calls follow within moments); events stream through a page at a time.
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from collections.abc import AsyncIterable, Callable
from dataclasses import dataclass, field

from gateway.analysis.learnt import TransformStats, learn
from gateway.base.types import Usage
from gateway.config.schema.experiments import EXPERIMENT_TENANT_PREFIX
from gateway.config.schema.root import GatewayConfig
from gateway.core.metering import cost_of
from gateway.ledger.event import CostEvent
from policies import PASSTHROUGH_HEADER, Action, Facts, PolicyEngine, UnknownModel

REQUEST_ACTIONS = frozenset(action.value for action in Action)
TRANSFORMS = frozenset({Action.COMPRESS.value, Action.RETRIEVE.value})
RECENT_REQUESTS = 200_000
ASSUMED_SUMMARY_SHARE = 0.02
"""Without a recorded summary to learn from: the cheap model writes 2% of the tokens it reads."""
SHADOW_ACTION = "shadow"
TIMEOUT_ACTION = "timeout"

# the reasons counted in ``uncertainty``
MODELLED_TRANSFORM = (
    "transform modelled: sent at the policy's target (none recorded to learn from), cache cold"
)
MODELLED_SIZE_RATIO = (
    "transform modelled: sent at the period's recorded share of the prompt (at most the policy's target), "
    "cache cold"
)
MODELLED_SIDE_RATE = "side-call spend of a modelled transform at the period's recorded rate per token cut"
MODELLED_SIDE_ASSUMED = "side-call spend of a modelled transform assumed (no recorded one to learn from)"
CACHE_FROM_COUNTERFACTUAL = "forwarded unchanged: cached tokens as the counterfactual had them"
REROUTED_COLD = "rerouted to another model: its cache assumed cold"
NO_CACHE_STATE = "decided without the conversation's cache state (the cache chose the recorded action)"
CACHE_CHOICE_KEPT = "the cache's choice in the warning band kept as recorded (the same band in the candidate)"
HEADERS_ABSENT = "decided as without headers (the candidate has rules on headers)"
CARRIED_FAILED = "carried over: a failed call"
CARRIED_OTHER = "carried over: not a chat request the policy decides (embeddings, passthrough, no decision)"
CARRIED_UNCOUNTED = "carried over: no prompt count recorded and not forwarded unchanged"
CARRIED_EXPERIMENT = "carried over: an experiment's call"
CARRIED_ORPHAN = "carried over: a side call whose request is not in the period"
UNPRICED = "the candidate gives the model no price: costed $0"


@dataclass(slots=True)
class Side:
    """One column of the comparison: what happened, or what the candidate would have done."""

    requests: int = 0
    spend_nanos: int = 0
    side_nanos: int = 0
    """Side calls (summaries, embeddings, billed timeouts) and experiments' calls."""
    counterfactual_nanos: int = 0
    over_cliff: int = 0
    """Requests billed past a price tier."""

    @property
    def total_nanos(self) -> int:
        return self.spend_nanos + self.side_nanos

    @property
    def saving_nanos(self) -> int:
        return self.counterfactual_nanos - self.total_nanos


@dataclass(slots=True)
class Pair:
    recorded: Side = field(default_factory=Side)
    replayed: Side = field(default_factory=Side)


@dataclass(frozen=True, slots=True)
class Outcome:
    """A request's replay, remembered for its side calls."""

    kept: bool
    """The candidate does what was recorded: the recorded side calls happen again."""
    tenant: str


@dataclass(slots=True)
class Replay:
    candidate: GatewayConfig
    engine: PolicyEngine
    total: Pair = field(default_factory=Pair)
    tenants: dict[str, Pair] = field(default_factory=dict)
    models: dict[str, Pair] = field(default_factory=dict)
    actions: Counter[tuple[str, str, str]] = field(default_factory=Counter)
    """(band, "recorded" or "replayed", action) → requests."""
    uncertainty: Counter[str] = field(default_factory=Counter)
    bases: Counter[str] = field(default_factory=Counter)
    """How the recorded counterfactuals were known (``counterfactual_basis``)."""
    events: int = 0
    first_ms: int | None = None
    last_ms: int | None = None
    _recent: OrderedDict[str, Outcome] = field(default_factory=OrderedDict)
    stats: TransformStats = field(default_factory=TransformStats)
    """What the period's transforms did, learnt beforehand (``learnt.learn``) or as the events come."""
    learning: bool = True
    _header_rules: bool = False

    def __post_init__(self) -> None:
        self._header_rules = bool(self.engine.header_names - {PASSTHROUGH_HEADER})

    def add(self, event: CostEvent) -> None:
        self.events += 1
        self.first_ms = event.time_ms if self.first_ms is None else self.first_ms
        self.last_ms = event.time_ms
        if self.learning:
            self.stats.observe(event)
        if event.parent_id is not None or event.action == SHADOW_ACTION:
            self._side(event)
        else:
            self._request(event)

    # requests

    def _request(self, event: CostEvent) -> None:
        recorded = _Priced(event.cost_nanos, event.counterfactual_nanos, event.tier is not None, event.model)
        self.bases[event.counterfactual_basis or "unknown"] += 1
        replayed, band, action, kept = self._decide(event)
        self.actions[(event.band or band, "recorded", event.action)] += 1
        self.actions[(band, "replayed", action)] += 1
        self._remember(event.id, Outcome(kept, event.tenant))
        self._count(event.tenant, recorded, replayed)

    def _count(self, tenant: str, recorded: _Priced, replayed: _Priced) -> None:
        pairs = (self.total, self._pair(self.tenants, tenant))
        for pair in pairs:
            _add(pair.recorded, recorded)
            _add(pair.replayed, replayed)
        _add(self._pair(self.models, recorded.model).recorded, recorded)
        _add(self._pair(self.models, replayed.model).replayed, replayed)

    def _decide(self, event: CostEvent) -> tuple[_Priced, str, str, bool]:
        """The replayed request, its band under the candidate, its action, and whether it is as recorded."""
        band = event.band or "unknown"
        if not 200 <= event.status < 300:
            return self._carried(event, CARRIED_FAILED), band, event.action, True
        if event.action not in REQUEST_ACTIONS:
            return self._carried(event, CARRIED_OTHER), band, event.action, True
        prompt = event.prompt_tokens
        if prompt is None and event.action == Action.FORWARD.value and event.model == event.requested_model:
            prompt = event.input_tokens
        if prompt is None:
            return self._carried(event, CARRIED_UNCOUNTED), band, event.action, True
        facts = Facts(tenant=event.tenant, model=event.requested_model, prompt_tokens=prompt)
        try:
            decision = self.engine.decide(facts)
        except UnknownModel:
            return self._carried(event, CARRIED_OTHER), band, event.action, True
        band, action = decision.band.value, decision.action.value
        if self._header_rules:
            self.uncertainty[HEADERS_ABSENT] += 1
        if event.reason is not None:  # the conversation's cache chose the recorded action in the band
            if band == event.band and decision.model == event.model and not decision.rejection:
                self.uncertainty[CACHE_CHOICE_KEPT] += 1
                action = event.action
            else:
                self.uncertainty[NO_CACHE_STATE] += 1
        counterfactual = self._counterfactual(event, prompt)
        if decision.rejection is not None:
            return _Priced(0, counterfactual, False, decision.model), band, action, False
        if action == event.action and decision.model == event.model:  # as recorded: its usage re-priced
            cost, tier = self._price(_usage_of(event), event.model)
            if event.counterfactual_basis == "over_window":
                counterfactual = cost
            return _Priced(cost, counterfactual, tier, event.model), band, action, True
        if action in TRANSFORMS:
            compress = action == Action.COMPRESS.value
            target = decision.compress.target_tokens if compress else decision.retrieve.budget_tokens
            ratio = self.stats.sent_ratio(action)
            if ratio is None:
                sent = min(prompt, target)
                self.uncertainty[MODELLED_TRANSFORM] += 1
            else:
                sent = min(prompt, target, round(prompt * ratio))
                self.uncertainty[MODELLED_SIZE_RATIO] += 1
            usage = Usage(input_tokens=sent, output_tokens=event.output_tokens)
            cost, tier = self._price(usage, decision.model)
            side = self._modelled_side(action, prompt - sent, decision.compress.cheap_model or decision.model)
            priced = _Priced(cost, counterfactual, tier, decision.model, side_nanos=side)
            return priced, band, action, False
        if decision.model == event.requested_model:
            cached = event.counterfactual_cached_tokens
            self.uncertainty[CACHE_FROM_COUNTERFACTUAL] += 1
        else:
            cached = 0
            self.uncertainty[REROUTED_COLD] += 1
        usage = Usage(input_tokens=prompt, cached_input_tokens=cached, output_tokens=event.output_tokens)
        cost, tier = self._price(usage, decision.model)
        return _Priced(cost, counterfactual, tier, decision.model), band, action, False

    def _counterfactual(self, event: CostEvent, prompt: int) -> int:
        """What forwarding the request unchanged to the model asked for costs at the candidate's prices."""
        usage = Usage(
            input_tokens=prompt,
            cached_input_tokens=event.counterfactual_cached_tokens,
            output_tokens=event.output_tokens,
        )
        found = cost_of(usage, self.candidate, event.requested_model)
        return event.counterfactual_nanos if found is None else found.total_nanos

    def _modelled_side(self, action: str, cut: int, cheap_model: str) -> int:
        learnt = self.stats.side_per_cut(action)
        if learnt is not None:
            self.uncertainty[MODELLED_SIDE_RATE] += 1
            return learnt[0] * cut // learnt[1]
        self.uncertainty[MODELLED_SIDE_ASSUMED] += 1
        usage = Usage(input_tokens=cut, output_tokens=int(cut * ASSUMED_SUMMARY_SHARE))
        return self._price(usage, cheap_model)[0]

    def _carried(self, event: CostEvent, why: str) -> _Priced:
        self.uncertainty[why] += 1
        cost, tier = self._price(_usage_of(event), event.model, fallback=event.cost_nanos)
        counterfactual = event.counterfactual_nanos - event.cost_nanos + cost
        return _Priced(cost, counterfactual, tier, event.model)

    def _price(self, usage: Usage, model: str, *, fallback: int | None = None) -> tuple[int, bool]:
        found = cost_of(usage, self.candidate, model)
        if found is None:
            if fallback is not None:
                return fallback, False
            self.uncertainty[UNPRICED] += 1
            return 0, False
        return found.total_nanos, found.tier is not None

    # side calls

    def _side(self, event: CostEvent) -> None:
        recorded = event.cost_nanos
        if event.action == SHADOW_ACTION or event.tenant.startswith(EXPERIMENT_TENANT_PREFIX):
            self.uncertainty[CARRIED_EXPERIMENT] += 1
            replayed = recorded
        else:
            parent = self._recent.get(event.parent_id or "")
            if parent is None or parent.tenant != event.tenant:
                self.uncertainty[CARRIED_ORPHAN] += 1
                replayed = self._price(_usage_of(event), event.model, fallback=recorded)[0]
            elif parent.kept or event.action == TIMEOUT_ACTION:
                replayed = self._price(_usage_of(event), event.model, fallback=recorded)[0]
            else:
                replayed = 0  # the candidate decided otherwise: this side call is not made
        for pair in (self.total, self._pair(self.tenants, event.tenant)):
            pair.recorded.side_nanos += recorded
            pair.replayed.side_nanos += replayed
        model = self._pair(self.models, event.model)
        model.recorded.side_nanos += recorded
        model.replayed.side_nanos += replayed

    def _remember(self, request_id: str, outcome: Outcome) -> None:
        self._recent[request_id] = outcome
        if len(self._recent) > RECENT_REQUESTS:
            self._recent.popitem(last=False)

    @staticmethod
    def _pair(pairs: dict[str, Pair], key: str) -> Pair:
        found = pairs.get(key)
        if found is None:
            found = pairs[key] = Pair()
        return found


@dataclass(frozen=True, slots=True)
class _Priced:
    cost_nanos: int
    counterfactual_nanos: int
    over_cliff: bool
    model: str
    side_nanos: int = 0


def _add(side: Side, priced: _Priced) -> None:
    side.requests += 1
    side.spend_nanos += priced.cost_nanos
    side.side_nanos += priced.side_nanos
    side.counterfactual_nanos += priced.counterfactual_nanos
    side.over_cliff += priced.over_cliff


def _usage_of(event: CostEvent) -> Usage:
    return Usage(
        input_tokens=event.input_tokens,
        cached_input_tokens=event.cached_tokens,
        output_tokens=event.output_tokens,
        reasoning_tokens=event.reasoning_tokens,
        cache_write_tokens=event.cache_write_tokens,
        tool_uses=_tool_uses(event.tool_uses),
    )


def _tool_uses(text: str | None) -> tuple[tuple[str, int], ...]:
    if not text:
        return ()
    uses = []
    for part in text.split(";"):
        kind, _, count = part.partition("=")
        if count.isdigit():
            uses.append((kind, int(count)))
    return tuple(sorted(uses))


async def replay(
    events: Callable[[], AsyncIterable[CostEvent]], candidate: GatewayConfig, engine: PolicyEngine
) -> Replay:
    """Two passes over ``events()``: what the period's transforms did, then every request replayed."""
    result = Replay(candidate, engine, stats=await learn(events()), learning=False)
    async for event in events():
        result.add(event)
    return result
