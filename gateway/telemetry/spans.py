"""The observer that turns a traced request's record into spans, once the request is over.

One server span for the request, child of the client's span when it sent a ``traceparent``, and under it
one client span per upstream attempt (each retry and fallback its own), each with the exact start and end
the request path noted (``time.perf_counter`` readings, placed on the wall clock by the record's start).
Ending a span only queues it: the exporter's thread sends it (``gateway.telemetry.export``).
"""

from __future__ import annotations

from collections.abc import Callable

from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode, Tracer
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from gateway.base.record import Attempt, RequestRecord
from gateway.config.schema.root import GatewayConfig
from gateway.telemetry.attributes import (
    attempt_attributes,
    attempt_span_name,
    server_attributes,
    server_span_name,
)

W3C = TraceContextTextMapPropagator()


class SpanObserver:
    """Runs after the ledger's observer (it reads the cost and saving that one sets)."""

    def __init__(self, tracer: Tracer, *, config: Callable[[], GatewayConfig]) -> None:
        self._tracer = tracer
        self._config = config

    def __call__(self, record: RequestRecord) -> None:
        attempts = record.attempt_log
        if attempts is None:  # not traced: background work, an experiment's call
            return
        providers = self._config().providers
        parent = W3C.extract(record.trace_context) if record.trace_context else None
        clock = _Clock(record)
        span = self._tracer.start_span(
            server_span_name(record),
            context=parent,
            kind=SpanKind.SERVER,
            attributes=server_attributes(record, providers),
            start_time=clock.epoch_ns(record.started),
        )
        if record.status >= 500:
            span.set_status(Status(StatusCode.ERROR))
        inside = trace.set_span_in_context(span)
        for number, attempt in enumerate(attempts, 1):
            child = self._tracer.start_span(
                attempt_span_name(record, attempt),
                context=inside,
                kind=SpanKind.CLIENT,
                attributes=attempt_attributes(record, attempt, number, providers),
                start_time=clock.epoch_ns(attempt.started),
            )
            if attempt.error is not None:
                child.set_status(Status(StatusCode.ERROR))
            child.end(end_time=clock.epoch_ns(_ended(record, attempt)))
        span.end(end_time=clock.epoch_ns(record.started + (record.total_seconds or 0.0)))


class _Clock:
    """A ``perf_counter`` reading of the request's → nanoseconds since the epoch (OpenTelemetry's time)."""

    def __init__(self, record: RequestRecord) -> None:
        self._offset = record.started_at - record.started

    def epoch_ns(self, reading: float) -> int:
        return int((reading + self._offset) * 1e9)


def _ended(record: RequestRecord, attempt: Attempt) -> float:
    """When the attempt ended: the one that answered ends with its answer's last byte (a stream's too)."""
    if attempt.error is None and record.upstream_seconds is not None:
        return max(attempt.ended, attempt.started + record.upstream_seconds)
    return attempt.ended
