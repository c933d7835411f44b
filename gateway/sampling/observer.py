"""``Sampler``: the observer the pipeline calls after each response. It decides, builds the signal and
hands it to a sink; it never waits on anything."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from gateway.base.record import CACHE_HIT, RequestRecord
from gateway.config.schema.sampling import SamplingConfig
from gateway.sampling.decide import is_sampled
from gateway.sampling.signals import Signal, signal_of


class SignalSink(Protocol):
    def record(self, signal: Signal) -> None: ...


class Sampler:
    """An ``Observer`` (``gateway.base.record``). ``config`` is read per request, so a reload applies at
    once."""

    def __init__(self, sink: SignalSink, *, config: Callable[[], SamplingConfig] = SamplingConfig) -> None:
        self._sink = sink
        self._config = config
        self.seen = 0
        self.sampled = 0

    def __call__(self, record: RequestRecord) -> None:
        self.seen += 1
        if record.endpoint not in ("chat", "responses", "messages") or record.pending_response is not None:
            return  # a background response's creation says nothing of how the model behaves
        if record.action == CACHE_HIT:
            return  # nor does an answer from the response cache: the model's was sampled when it was given
        config = self._config()
        model = record.called_model or record.requested_model
        if not config.enabled or model is None:
            return
        tenant = record.tenant.name if record.tenant is not None else ""
        if not is_sampled(record.request_id, config.rate_for(model, tenant), probe=record.probe):
            return
        signal = signal_of(record, capture=config.captures(tenant))
        if signal is not None:
            self.sampled += 1
            self._sink.record(signal)
