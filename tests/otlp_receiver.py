"""An OTLP/HTTP trace receiver process for the tracing tests: what a collector (Jaeger, Tempo, the
OpenTelemetry Collector) is to the gateway, reduced to writing down what it is sent.

``python -m tests.otlp_receiver OUT`` prints ``port <n>`` once it listens. ``POST /v1/traces`` takes an
``ExportTraceServiceRequest`` in protobuf (gzip or not), decoded with ``opentelemetry-proto``: each span
becomes a JSON line in ``OUT`` (ids in hex, attributes as plain values, its resource's attributes
beside), and the raw bodies are appended to ``OUT.raw``, so a test can look for text in what went over
the wire too.
"""

from __future__ import annotations

import asyncio
import gzip
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson
from aiohttp import web
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

PROTOBUF = "application/x-protobuf"


def value_of(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [value_of(each) for each in value.array_value.values]
    if kind == "kvlist_value":
        return attributes_of(value.kvlist_value.values)
    if kind == "bytes_value":
        return value.bytes_value.hex()
    return getattr(value, kind) if kind is not None else None


def attributes_of(pairs: Any) -> dict[str, Any]:
    return {pair.key: value_of(pair.value) for pair in pairs if isinstance(pair, KeyValue)}


def spans_of(request: ExportTraceServiceRequest) -> Iterator[dict[str, Any]]:
    for resource_spans in request.resource_spans:
        resource = attributes_of(resource_spans.resource.attributes)
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                yield {
                    "trace_id": span.trace_id.hex(),
                    "span_id": span.span_id.hex(),
                    "parent_span_id": span.parent_span_id.hex(),
                    "trace_state": span.trace_state,
                    "name": span.name,
                    "kind": span.kind,
                    "start_ns": span.start_time_unix_nano,
                    "end_ns": span.end_time_unix_nano,
                    "attributes": attributes_of(span.attributes),
                    "events": [
                        {"name": event.name, "attributes": attributes_of(event.attributes)}
                        for event in span.events
                    ],
                    "status": {"code": span.status.code, "message": span.status.message},
                    "scope": scope_spans.scope.name,
                    "resource": resource,
                }


def build(out: Path) -> web.Application:
    async def traces(request: web.Request) -> web.Response:
        body = await request.read()
        if request.headers.get("content-encoding") == "gzip":
            body = gzip.decompress(body)
        if request.content_type != PROTOBUF:
            return web.Response(status=415, text=f"expected {PROTOBUF}")
        export = ExportTraceServiceRequest()
        export.ParseFromString(body)
        with out.with_name(out.name + ".raw").open("ab") as raw:
            raw.write(body)
        with out.open("ab") as lines:
            for span in spans_of(export):
                lines.write(orjson.dumps(span) + b"\n")
        return web.Response(body=ExportTraceServiceResponse().SerializeToString(), content_type=PROTOBUF)

    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_post("/v1/traces", traces)
    return app


async def serve(out: Path) -> None:
    runner = web.AppRunner(build(out))
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    server = site._server
    assert server is not None
    port = server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    print(f"port {port}", flush=True)
    await asyncio.Event().wait()


@contextmanager
def receiver(out: Path) -> Iterator[str]:
    """Runs the receiver process, writing to ``out``; yields its base URL (an OTLP endpoint)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.otlp_receiver", str(out)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        if not line.startswith("port "):
            raise RuntimeError(f"the OTLP receiver did not start: {line!r}")
        yield f"http://127.0.0.1:{int(line.split()[1])}"
    finally:
        process.terminate()
        process.wait(timeout=10)


def read_spans(out: Path) -> list[dict[str, Any]]:
    """The spans received so far."""
    if not out.exists():
        return []
    return [orjson.loads(line) for line in out.read_bytes().splitlines() if line.strip()]


if __name__ == "__main__":
    asyncio.run(serve(Path(sys.argv[1])))
