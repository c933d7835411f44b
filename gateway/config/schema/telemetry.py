"""``telemetry:`` in the config file: OpenTelemetry traces of requests, exported over OTLP/HTTP.

Off by default. On when ``enabled`` is true or when the standard ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``) is set; ``OTEL_SDK_DISABLED=true`` or ``OTEL_TRACES_EXPORTER=none``
keeps it off whatever this says (``gateway.telemetry.switch``). A field set here wins over its ``OTEL_*``
variable; one left unset leaves the variable (or the SDK's default) in force. Read when the gateway starts.
"""

from __future__ import annotations

from pydantic import Field

from gateway.config.schema.base import Strict


class TelemetryConfig(Strict):
    enabled: bool = Field(
        default=False,
        description="export a span per request and one per upstream attempt over OTLP/HTTP; setting "
        "OTEL_EXPORTER_OTLP_ENDPOINT turns it on too",
    )
    endpoint: str | None = Field(
        default=None,
        description="the collector's OTLP/HTTP base URL (`/v1/traces` is appended), e.g. "
        "http://otel-collector:4318; unset: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, OTEL_EXPORTER_OTLP_ENDPOINT, "
        "else http://localhost:4318",
    )
    headers: dict[str, str] = Field(
        default_factory=dict,
        description="headers sent with every export (an API key: `${VAR}` interpolation); empty: "
        "OTEL_EXPORTER_OTLP_HEADERS",
    )
    service_name: str | None = Field(
        default=None,
        description="the spans' service.name; unset: OTEL_SERVICE_NAME, else llm-cost-gateway",
    )
    sample_ratio: float | None = Field(
        default=None,
        ge=0,
        le=1,
        description="share of new traces kept (a client's sampled flag is followed); unset: "
        "OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG, else every trace",
    )
