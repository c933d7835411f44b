"""The metrics observer: after each response, what the request did goes into the metric families.

It runs on every request, so it only adds to counters: the label children are looked up once and kept,
and the costs are the ledger's own events, handed over by ``LedgerRecorder`` (``count_event`` is one of
its sinks), so a request is priced once and the metrics and the ledger never disagree on what it cost.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from gateway.base.money import NANOS_PER_USD
from gateway.base.record import RequestRecord
from gateway.config.schema.root import GatewayConfig, ModelConfig
from gateway.core.count_limit import COUNT_ENDPOINTS
from gateway.ledger import CostEvent
from gateway.metrics.families import Families
from gateway.servertools.kinds import parse_uses_text

OTHER = "other"
"""The model label of names that are not in the config: clients choose them, so they are not labels."""
NONE = "none"
"""The model label of requests that failed before a model was known (bad JSON, a bad key)."""


class RequestMetrics:
    def __init__(self, families: Families, *, config: Callable[[], GatewayConfig]) -> None:
        self.families = families
        self._config = config
        self._children: dict[tuple[object, ...], Any] = {}

    def __call__(self, record: RequestRecord) -> None:
        config = self._config()
        models = config.models
        f = self.families
        model = _label(record.called_model or record.requested_model, models)
        if record.status:  # background work (pre-compression) has none: not a request, only its calls
            self._child(f.requests, record.endpoint, model, record.action, str(record.status)).inc()
        if record.endpoint in COUNT_ENDPOINTS and record.tenant is not None and record.status:
            self._child(f.token_counts, record.endpoint, record.tenant.name, str(record.status)).inc()
        if record.retries:
            self._child(f.retries, model).inc(record.retries)
        upstream = record.upstream_seconds
        if upstream is not None:
            self._child(f.upstream_latency, model).observe(upstream)
            if record.total_seconds is not None:
                self._child(f.overhead, record.endpoint).observe(max(0.0, record.total_seconds - upstream))
        if record.first_token_seconds is not None:
            self._child(f.first_token, model).observe(record.first_token_seconds)

    def count_event(self, event: CostEvent, kind: str) -> None:
        """A ``LedgerRecorder`` sink: the tokens, cost and saving of one priced upstream call."""
        self._count(event, kind, self._config().models)

    def _count(self, event: CostEvent, kind: str, models: Mapping[str, ModelConfig]) -> None:
        f = self.families
        model = _label(event.model, models)
        if event.input_tokens:
            self._child(f.input_tokens, model).inc(event.input_tokens)
        if event.cached_tokens:
            self._child(f.cached_input_tokens, model).inc(event.cached_tokens)
        if event.output_tokens:
            self._child(f.output_tokens, model).inc(event.output_tokens)
        if event.cost_nanos:
            self._child(f.cost, model, kind).inc(event.cost_nanos / NANOS_PER_USD)
        if event.tool_uses:
            self._count_tools(event, model, models.get(event.model))
        saving = event.saving_nanos
        if saving > 0:
            self._child(f.savings, _label(event.requested_model, models)).inc(saving / NANOS_PER_USD)
        elif saving < 0:
            self._child(f.savings_cost, _label(event.requested_model, models)).inc(-saving / NANOS_PER_USD)

    def _count_tools(self, event: CostEvent, model: str, config: ModelConfig | None) -> None:
        prices = config.pricing.per_use if config is not None and config.pricing is not None else {}
        for tool, count in parse_uses_text(event.tool_uses):
            priced = "true" if tool in prices else "false"
            self._child(self.families.tool_uses, model, tool, priced).inc(count)

    def _child(self, family: Any, *labels: str) -> Any:
        """``family.labels(*labels)``, looked up once per distinct label set (that lookup validates and
        locks; this is a dict read)."""
        key = (id(family), *labels)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = family.labels(*labels)
        return child


def _label(model: str | None, models: Mapping[str, object]) -> str:
    if model is None:
        return NONE
    return model if model in models else OTHER
