"""The total-cost view: per called model and context-length bucket, what its answers really cost.

Each request (an event without a parent, or an experiment's shadow call) lands in the cell of its model
and of the bucket of its prompt as received (``prompt_tokens``; the billed input on events recorded before
it was kept). A cell adds up requests, spend, the input tokens paid and what they cost (cache and tiers
included), latency and time to first token, failures, retries and transforms; the calls made on a
request's behalf (summaries, embeddings, timed-out attempts billed anyway) are added to its cell's extra
spend, found through a bounded map of recent request ids (a side call whose request is older than that
lands in its model's ``unattributed`` spend). "Cost per successful answer" divides everything the cell
spent, failures and side calls included, by its successful answers.

A cell with fewer requests than ``sampling.boundary.min_count`` is marked thin: shown, never a finding.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import AsyncIterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from gateway.analysis.histogram import LogHistogram
from gateway.base.money import usd
from gateway.config.schema.root import GatewayConfig
from gateway.ledger.event import CostEvent
from gateway.tokens.buckets import Bucket, bucket_index, buckets_for
from policies import Action

SHADOW_ACTION = "shadow"
TRANSFORMS = frozenset({Action.COMPRESS.value, Action.RETRIEVE.value})
RECENT_REQUESTS = 200_000
"""Request ids remembered to find a side call's cell (constant memory: the oldest are forgotten)."""


@dataclass(slots=True)
class Cell:
    requests: int = 0
    shadow: int = 0
    failures: int = 0
    retried: int = 0
    retries: int = 0
    transformed: int = 0
    spend_nanos: int = 0
    extra_nanos: int = 0
    """Side calls and billed timed-out attempts made for this cell's requests."""
    input_tokens: int = 0
    input_cost_nanos: int = 0
    priced_input_tokens: int = 0
    """The input tokens of events whose cost is split by unit (the base of the cost per 1K input)."""
    latency: LogHistogram = field(default_factory=LogHistogram)
    first_token: LogHistogram = field(default_factory=LogHistogram)

    def add(self, event: CostEvent) -> None:
        self.requests += 1
        self.shadow += event.action == SHADOW_ACTION
        self.failures += not 200 <= event.status < 300
        self.retried += event.retries > 0
        self.retries += event.retries
        self.transformed += event.action in TRANSFORMS
        self.spend_nanos += event.cost_nanos
        self.input_tokens += event.input_tokens
        if event.cost_parts is not None:
            self.input_cost_nanos += event.cost_parts[0] + event.cost_parts[1] + event.cost_parts[2]
            self.priced_input_tokens += event.input_tokens
        self.latency.add(event.upstream_ms if event.upstream_ms is not None else event.latency_ms)
        self.first_token.add(event.first_token_ms)

    @property
    def successes(self) -> int:
        return self.requests - self.failures

    def row(self, *, thin_below: int) -> dict[str, Any]:
        successes = self.successes
        total = self.spend_nanos + self.extra_nanos
        per_1k = (
            usd(self.input_cost_nanos * 1000 // self.priced_input_tokens, trim=True)
            if self.priced_input_tokens
            else None
        )
        return {
            "requests": self.requests,
            "shadow_calls": self.shadow,
            "thin": self.requests < thin_below,
            "spend_usd": usd(self.spend_nanos, trim=True),
            "side_spend_usd": usd(self.extra_nanos, trim=True),
            "input_tokens": self.input_tokens,
            "input_usd_per_1k_tokens": per_1k,
            "latency_ms": self.latency.spread(),
            "first_token_ms": self.first_token.spread(),
            "failure_rate": _rate(self.failures, self.requests),
            "retry_rate": _rate(self.retried, self.requests),
            "retries": self.retries,
            "transform_share": _rate(self.transformed, self.requests),
            "successes": successes,
            "cost_per_success_usd": usd(total // successes, trim=True) if successes else None,
        }


def _rate(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


@dataclass(slots=True)
class CostView:
    buckets: tuple[Bucket, ...]
    cells: dict[tuple[str, int], Cell] = field(default_factory=dict)
    unattributed: dict[str, int] = field(default_factory=dict)
    """Side-call spend per model whose request was not found (older than the recent ids, or outside)."""
    events: int = 0
    _recent: OrderedDict[str, tuple[tuple[str, int], str]] = field(default_factory=OrderedDict)

    def add(self, event: CostEvent) -> None:
        self.events += 1
        if event.parent_id is None or event.action == SHADOW_ACTION:
            edges = [bucket.high for bucket in self.buckets if bucket.high is not None]
            tokens = event.prompt_tokens if event.prompt_tokens is not None else event.input_tokens
            key = (event.model, bucket_index(tokens, edges))
            cell = self.cells.get(key)
            if cell is None:
                cell = self.cells[key] = Cell()
            cell.add(event)
            if event.parent_id is None:
                self._remember(event.id, key, event.tenant)
            return
        found = self._recent.get(event.parent_id)
        if found is not None and found[1] == event.tenant:
            self.cells[found[0]].extra_nanos += event.cost_nanos
        else:
            self.unattributed[event.model] = self.unattributed.get(event.model, 0) + event.cost_nanos

    def _remember(self, request_id: str, key: tuple[str, int], tenant: str) -> None:
        self._recent[request_id] = (key, tenant)
        if len(self._recent) > RECENT_REQUESTS:
            self._recent.popitem(last=False)


async def cost_view(events: AsyncIterable[CostEvent], config: GatewayConfig) -> CostView:
    view = CostView(buckets_for(config.sampling.buckets))
    async for event in events:
        view.add(event)
    return view


def document(view: CostView, config: GatewayConfig, *, period: dict[str, str]) -> dict[str, Any]:
    """The view as JSON data: one row per model and bucket, and the experiments' pairs side by side."""
    thin_below = config.sampling.boundary.min_count
    rows = []
    for (model, index), cell in sorted(view.cells.items()):
        rows.append({"model": model, "bucket": view.buckets[index].label, **cell.row(thin_below=thin_below)})
    return {
        "period": period,
        "events": view.events,
        "thin_below_requests": thin_below,
        "rows": rows,
        "unattributed_side_spend_usd": {
            model: usd(nanos, trim=True) for model, nanos in sorted(view.unattributed.items())
        },
        "experiments": _experiments(view, config, thin_below),
    }


def _experiments(view: CostView, config: GatewayConfig, thin_below: int) -> list[dict[str, Any]]:
    """Per experiment that compared models, per bucket where both sides have requests: the two side by
    side (the primary's own traffic, the candidate's shadow or split calls)."""
    found = []
    for name, experiment in sorted(config.experiments.items()):
        models: Sequence[str] = (*experiment.primary, experiment.candidate)
        for index, bucket in enumerate(view.buckets):
            sides = {model: view.cells.get((model, index)) for model in models}
            present = {model: cell for model, cell in sides.items() if cell is not None}
            if experiment.candidate not in present or len(present) < 2:
                continue
            found.append(
                {
                    "experiment": name,
                    "bucket": bucket.label,
                    "models": {model: cell.row(thin_below=thin_below) for model, cell in present.items()},
                }
            )
    return found
