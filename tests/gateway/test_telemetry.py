"""OpenTelemetry tracing in the process: when it is on, the upstream layer's log of attempts (each retry
and fallback), the spans the observer makes of a record (the SDK's in-memory exporter stands for the
collector), and that a gateway with tracing off imports no opentelemetry. Through real processes and an
OTLP/HTTP receiver: ``tests/e2e/test_tracing_e2e.py``."""

from __future__ import annotations

import itertools
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import respx
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from gateway.base.record import Attempt, RequestRecord
from gateway.base.types import Tenant, Usage
from gateway.config.runtime import Route
from gateway.config.schema.root import GatewayConfig
from gateway.config.schema.telemetry import TelemetryConfig
from gateway.config.settings import Settings
from gateway.telemetry.context import begin_trace, note_parameters
from gateway.telemetry.export import open_tracing
from gateway.telemetry.switch import tracing_on
from gateway.upstream.calls import send
from gateway.upstream.clients import UpstreamPool
from tests.factories import UPSTREAM, make_config

SECRET = "the launch code is 0000"


@pytest.mark.parametrize(
    ("environment", "telemetry", "on"),
    [
        ({}, {}, False),
        ({}, {"enabled": True}, True),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, {}, True),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, {}, True),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_SDK_DISABLED": "true"}, {}, False),
        ({"OTEL_SDK_DISABLED": "true"}, {"enabled": True}, False),
        ({"OTEL_TRACES_EXPORTER": "none"}, {"enabled": True}, False),
        ({"OTEL_TRACES_EXPORTER": "otlp"}, {"enabled": True}, True),
    ],
)
def test_tracing_on_by_config_or_otel_variables_off_by_default(
    monkeypatch: pytest.MonkeyPatch, environment: dict[str, str], telemetry: dict[str, Any], on: bool
) -> None:
    for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_SDK_DISABLED"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("OTEL_TRACES_EXPORTER", raising=False)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    assert tracing_on(Settings(), TelemetryConfig(**telemetry)) is on


def test_a_gateway_with_tracing_off_imports_no_opentelemetry_sdk() -> None:
    """FastAPI imports the OpenTelemetry API whatever the gateway does (its own telemetry stays off while
    no global provider is set, and the gateway sets none), and redis-py the SDK's metrics when installed;
    the SDK's tracing, the exporter, protobuf and the span-making modules come only with tracing on."""
    probe = (
        "import sys, gateway.edge.app, gateway.edge.lifespan, gateway.proxy.pipeline, gateway.fronts.chat; "
        "print(sorted(name for name in sys.modules if name.startswith(("
        "'opentelemetry.sdk.trace', 'opentelemetry.exporter', 'opentelemetry.proto', 'google.protobuf', "
        "'gateway.telemetry.spans', 'gateway.telemetry.export'))))"
    )
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert loaded.stdout.strip() == "[]"


def test_a_traced_request_notes_its_trace_headers_and_sampling_parameters_never_text() -> None:
    record = RequestRecord(request_id="req_1", endpoint="chat")
    headers = {"traceparent": "00-" + "a" * 32 + "-" + "b" * 16 + "-01", "authorization": "Bearer sk-x"}
    begin_trace(record, headers)
    note_parameters(
        record,
        {"messages": [{"role": "user", "content": SECRET}], "max_tokens": 50, "temperature": 0, "top_p": 0.5},
    )
    assert record.attempt_log == []
    assert record.trace_context == {"traceparent": headers["traceparent"]}
    assert record.span_attributes == {
        "gen_ai.request.max_tokens": 50,
        "gen_ai.request.temperature": 0,
        "gen_ai.request.top_p": 0.5,
    }
    note_parameters(record, {"max_output_tokens": 9, "temperature": "hot"})  # Responses' cap; no number
    assert record.span_attributes == {"gen_ai.request.max_tokens": 9}


def _route(model: str, config: GatewayConfig) -> Route:
    settings = config.models[model]
    provider = config.providers[settings.provider]
    return Route(model, settings.upstream_model or model, settings.provider, provider, settings)


@pytest.mark.anyio
async def test_send_logs_every_attempt_each_retry_and_fallback_its_own() -> None:
    config = GatewayConfig.model_validate(make_config())
    for name in ("mock",):  # two attempts per candidate
        config.providers[name] = config.providers[name].model_copy(
            update={"retry": config.providers[name].retry.model_copy(update={"attempts": 2})}
        )
    router = respx.Router()
    router.post(f"{UPSTREAM}/chat/completions").mock(
        side_effect=[
            httpx.Response(503, json={"error": {"message": "busy"}}),
            httpx.ConnectError("refused"),
            httpx.Response(429, json={"error": {"message": "slow down"}}),
            httpx.Response(200, json={"choices": []}),
        ]
    )
    pool = UpstreamPool(
        lambda provider: httpx.AsyncClient(transport=httpx.MockTransport(router.async_handler))
    )
    log: list[Attempt] = []
    exchange = await send(
        pool,
        (_route("gpt-5.4", config), _route("small", config)),
        path="/chat/completions",
        body_for=lambda route: b"{}",
        incoming_headers={},
        stream=False,
        attempt_log=log,
    )
    await pool.aclose()
    assert exchange.attempts == 4
    assert [(each.model, each.upstream_model, each.status, each.error) for each in log] == [
        ("gpt-5.4", "gpt-5.4", 503, "503"),
        ("gpt-5.4", "gpt-5.4", 0, "ConnectError"),
        ("small", "gpt-5.4-mini", 429, "429"),
        ("small", "gpt-5.4-mini", 200, None),
    ]
    assert all(each.started <= each.ended for each in log)
    assert all(before.ended <= after.started for before, after in itertools.pairwise(log))


class Exported:
    """The observer, with the SDK's in-memory exporter behind its batch processor."""

    def __init__(self) -> None:
        config = GatewayConfig.model_validate(make_config())
        self.exporter = InMemorySpanExporter()
        self.provider, self.observer = open_tracing(lambda: config, exporter=self.exporter)

    def spans(self) -> tuple[ReadableSpan, ...]:
        self.provider.force_flush()
        return self.exporter.get_finished_spans()


@pytest.fixture
def exported() -> Iterator[Exported]:
    found = Exported()
    yield found
    found.provider.shutdown()


def _traced_record(**fields: Any) -> RequestRecord:
    record = RequestRecord(request_id="req_traced", endpoint="chat", **fields)
    begin_trace(record, {"traceparent": f"00-{'1' * 32}-{'2' * 16}-01", "tracestate": "k=v"})
    return record


def test_the_observer_makes_a_server_span_and_a_client_span_per_attempt(
    exported: Exported,
) -> None:
    observer = exported.observer
    record = _traced_record(
        tenant=Tenant("acme", "k1"),
        requested_model="gpt-5.4",
        called_model="small",
        provider="mock",
        action="compress",
        band="warning",
        status=200,
        usage=Usage(input_tokens=1200, output_tokens=30, cached_input_tokens=1024),
        cost_nanos=2_500_000,
        saving_nanos=1_000_000,
        output_text=SECRET,
        attempts=2,
    )
    note_parameters(record, {"messages": [{"role": "user", "content": SECRET}], "max_tokens": 64})
    now = time.perf_counter()
    assert record.attempt_log is not None
    record.attempt_log += [
        Attempt("gpt-5.4", "gpt-5.4", "mock", now, now + 0.01, 503, "503"),
        Attempt("small", "gpt-5.4-mini", "mock", now + 0.02, now + 0.03, 200),
    ]
    record.upstream_seconds = 0.05  # a stream: the answering attempt ends with its last byte
    record.total_seconds = (now - record.started) + 0.08
    observer(record)
    failed, answered, server = exported.spans()

    assert server.kind is SpanKind.SERVER
    assert server.name == "POST /v1/chat/completions"
    assert server.context is not None and server.parent is not None
    assert server.context.trace_id == int("1" * 32, 16)
    assert server.parent.span_id == int("2" * 16, 16)
    assert dict(server.attributes or {}) == {
        "gateway.request_id": "req_traced",
        "gateway.endpoint": "chat",
        "http.request.method": "POST",
        "http.route": "/v1/chat/completions",
        "http.response.status_code": 200,
        "gen_ai.operation.name": "chat",
        "gen_ai.system": "openai",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-5.4",
        "gen_ai.response.model": "small",
        "gen_ai.request.max_tokens": 64,
        "gen_ai.usage.input_tokens": 1200,
        "gen_ai.usage.output_tokens": 30,
        "gen_ai.usage.cache_read.input_tokens": 1024,
        "gateway.tenant": "acme",
        "gateway.action": "compress",
        "gateway.band": "warning",
        "gateway.attempts": 2,
        "gateway.cost_usd": 0.0025,
        "gateway.saving_usd": 0.001,
    }
    for attempt in (failed, answered):
        assert attempt.kind is SpanKind.CLIENT
        assert attempt.parent is not None and attempt.parent.span_id == server.context.span_id
    assert failed.name == "chat gpt-5.4"
    assert failed.status.status_code is StatusCode.ERROR
    assert failed.attributes is not None and failed.attributes["error.type"] == "503"
    assert "gen_ai.usage.output_tokens" not in failed.attributes
    assert answered.name == "chat gpt-5.4-mini"
    assert answered.attributes is not None
    assert answered.attributes["gen_ai.response.model"] == "gpt-5.4-mini"
    assert answered.attributes["server.address"] == "upstream.test"
    assert answered.attributes["server.port"] == 80
    assert answered.attributes["gen_ai.usage.output_tokens"] == 30
    assert answered.start_time is not None and answered.end_time is not None
    assert answered.end_time - answered.start_time == pytest.approx(50_000_000, abs=1_000)
    assert server.start_time is not None and server.end_time is not None
    assert server.start_time <= failed.start_time <= answered.end_time <= server.end_time  # type: ignore[operator]
    everything = repr(
        [
            (span.name, span.attributes, span.events, span.resource.attributes)
            for span in (failed, answered, server)
        ]
    )
    assert SECRET not in everything


def test_the_observer_marks_a_failed_request_and_skips_untraced_ones(
    exported: Exported,
) -> None:
    observer = exported.observer
    observer(RequestRecord(request_id="req_untraced", endpoint="precompress"))
    record = _traced_record(status=502, action="forward", error_type="upstream_error", provider="mock")
    record.total_seconds = 0.01
    observer(record)
    (server,) = exported.spans()
    assert server.status.status_code is StatusCode.ERROR
    assert server.attributes is not None and server.attributes["error.type"] == "upstream_error"
    assert (
        server.resource.attributes["service.name"] in ("llm-cost-gateway",)
        or server.resource.attributes["service.name"]
    )
