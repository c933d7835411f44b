"""The OpenTelemetry SDK, set up for the gateway's traces: a tracer provider of its own (the global one is
left alone), its resource (``service.name``), its sampler, and a batch processor that exports over OTLP/HTTP
from a thread of its own, so no request ever waits on the collector.

Imported only when tracing is on (``gateway.telemetry.switch``). What the config leaves unset, the SDK
reads from the standard ``OTEL_*`` variables.
"""

from __future__ import annotations

from collections.abc import Callable

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter
from opentelemetry.sdk.trace.sampling import ParentBased, Sampler, TraceIdRatioBased

from gateway import __version__
from gateway.config.schema.root import GatewayConfig
from gateway.config.schema.telemetry import TelemetryConfig
from gateway.telemetry.spans import SpanObserver

DEFAULT_SERVICE_NAME = "llm-cost-gateway"
INSTRUMENTATION = "gateway.telemetry"


def open_tracing(
    config: Callable[[], GatewayConfig], *, exporter: SpanExporter | None = None
) -> tuple[TracerProvider, SpanObserver]:
    """The provider (shut it down at exit: that flushes what is queued) and the observer that fills it.
    ``exporter``: where spans go instead of OTLP/HTTP (tests)."""
    telemetry = config().telemetry
    provider = TracerProvider(resource=resource(telemetry), sampler=sampler(telemetry))
    provider.add_span_processor(BatchSpanProcessor(exporter or otlp_exporter(telemetry)))
    tracer = provider.get_tracer(INSTRUMENTATION, __version__)
    return provider, SpanObserver(tracer, config=config)


def otlp_exporter(telemetry: TelemetryConfig) -> OTLPSpanExporter:
    endpoint = f"{telemetry.endpoint.rstrip('/')}/v1/traces" if telemetry.endpoint else None
    return OTLPSpanExporter(endpoint=endpoint, headers=dict(telemetry.headers) or None)


def resource(telemetry: TelemetryConfig) -> Resource:
    """``service.name`` from the config, else ``OTEL_SERVICE_NAME`` (and ``OTEL_RESOURCE_ATTRIBUTES``),
    else the gateway's own name."""
    attributes = {"service.version": __version__}
    if telemetry.service_name:
        attributes["service.name"] = telemetry.service_name
    found = Resource.create(attributes)
    if str(found.attributes.get("service.name", "")).startswith("unknown_service"):
        found = found.merge(Resource({"service.name": DEFAULT_SERVICE_NAME}))
    return found


def sampler(telemetry: TelemetryConfig) -> Sampler | None:
    """The config's ratio (a client's sampled flag followed); None: the SDK's (``OTEL_TRACES_SAMPLER``)."""
    if telemetry.sample_ratio is None:
        return None
    return ParentBased(TraceIdRatioBased(telemetry.sample_ratio))
