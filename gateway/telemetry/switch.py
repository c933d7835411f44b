"""Whether the gateway traces, and starting it when it does: the one module of ``gateway.telemetry`` the
app imports whatever the answer, so that the OpenTelemetry SDK is not imported when tracing is off.

On when the config's ``telemetry.enabled`` is true or a collector is named in the standard variables
(``OTEL_EXPORTER_OTLP_ENDPOINT``, ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``); off, whatever else is set, with
``OTEL_SDK_DISABLED=true`` or ``OTEL_TRACES_EXPORTER=none``. Decided when the app starts.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AsyncExitStack

import anyio.to_thread
import structlog

from gateway.base.record import Observer
from gateway.config.schema.root import GatewayConfig
from gateway.config.schema.telemetry import TelemetryConfig
from gateway.config.settings import Settings

log = structlog.get_logger("gateway.telemetry")


def tracing_on(settings: Settings, telemetry: TelemetryConfig) -> bool:
    if settings.otel_sdk_disabled or (settings.otel_traces_exporter or "").strip().lower() == "none":
        return False
    return telemetry.enabled or bool(settings.otel_endpoint)


def start_tracing(
    stack: AsyncExitStack, settings: Settings, config: Callable[[], GatewayConfig]
) -> Observer | None:
    """The observer that makes the spans, when tracing is on (its exporter is flushed and stopped when
    ``stack`` closes); None when it is off."""
    telemetry = config().telemetry
    if not tracing_on(settings, telemetry):
        return None
    from gateway.telemetry.export import open_tracing

    provider, observer = open_tracing(config)
    stack.push_async_callback(anyio.to_thread.run_sync, provider.shutdown)
    log.info("tracing_on", endpoint=telemetry.endpoint or settings.otel_endpoint or "http://localhost:4318")
    return observer
