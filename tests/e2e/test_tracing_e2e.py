"""OpenTelemetry through real processes: a gateway started with the standard ``OTEL_EXPORTER_OTLP_ENDPOINT``
exports, over OTLP/HTTP, to a receiver process (``tests.otlp_receiver``) one server span per request (the
client's ``traceparent`` continued) and one client span per upstream attempt (a retry its own), with the
GenAI attributes, the gateway's action, cost and saving, and none of the prompt's or the answer's text.
Requests go through the official openai (chat, streamed and not) and anthropic (Messages) SDKs."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest

from tests.e2e.processes import gateway_process
from tests.e2e.test_messages_e2e import config_for
from tests.factories import write_config
from tests.otlp_receiver import read_spans, receiver

pytestmark = pytest.mark.e2e

SERVER, CLIENT = 2, 3
"""OTLP's span kinds."""
ERROR = 2
"""OTLP's error status code."""


@dataclass(frozen=True, slots=True)
class Traced:
    url: str
    key: str
    tenant: str
    spans: Path

    def openai(self) -> openai.OpenAI:
        return openai.OpenAI(base_url=f"{self.url}/v1", api_key=self.key, max_retries=0)

    def anthropic(self) -> anthropic.Anthropic:
        return anthropic.Anthropic(base_url=self.url, api_key=self.key, max_retries=0)

    def exported(self, request_ids: dict[str, int], *, timeout: float = 30.0) -> list[dict[str, Any]]:
        """The spans received once each request (id → attempts expected) has its server span and its
        attempts' spans (they are exported in the background, a batch every 100 ms here)."""
        deadline = time.monotonic() + timeout
        while True:
            spans = read_spans(self.spans)
            if all(_complete(spans, rid, attempts) for rid, attempts in request_ids.items()):
                return spans
            if time.monotonic() > deadline:
                raise AssertionError(f"spans missing after {timeout} s; received {len(spans)}")
            time.sleep(0.1)


def _complete(spans: list[dict[str, Any]], request_id: str, attempts: int) -> bool:
    mine = [span for span in spans if span["attributes"].get("gateway.request_id") == request_id]
    kinds = [span["kind"] for span in mine]
    return kinds.count(SERVER) == 1 and kinds.count(CLIENT) == attempts


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory, mock_url: str, redis_url: str) -> Iterator[Traced]:
    directory = tmp_path_factory.mktemp("tracing-e2e")
    suffix = uuid.uuid4().hex[:8]
    tenant, key = f"traced-{suffix}", f"sk-traced-{suffix}"
    path = write_config(directory / "gateway.yaml", config_for(mock_url, {"main": (tenant, key)}))
    out = directory / "spans.jsonl"
    with receiver(out) as endpoint:
        otel = {
            "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
            "OTEL_SERVICE_NAME": "gateway-e2e",
            "OTEL_BSP_SCHEDULE_DELAY": "100",
        }
        with gateway_process(path, redis_url, directory, extra_env=otel) as url:
            yield Traced(url, key, tenant, out)


def test_tracing_exports_a_span_per_request_and_per_attempt_to_an_otlp_receiver(
    traced: Traced, mock: httpx.Client
) -> None:
    secret = f"SECRET-{uuid.uuid4().hex}"  # in every prompt; the mock echoes it in every answer
    trace_id, parent_id = uuid.uuid4().hex, uuid.uuid4().hex[:16]
    chat = traced.openai().chat.completions
    plain = chat.with_raw_response.create(
        model="gpt-5.4",
        messages=[{"role": "user", "content": f"{secret} plain"}],
        max_tokens=40,
        temperature=0.3,
        extra_headers={"traceparent": f"00-{trace_id}-{parent_id}-01", "tracestate": "vendor=opaque"},
    )
    stream = chat.create(
        model="gpt-5.4", messages=[{"role": "user", "content": f"{secret} streamed"}], stream=True
    )
    streamed = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
    messages = traced.anthropic().messages.with_raw_response.create(
        model="claude-sonnet-4-5", max_tokens=64, messages=[{"role": "user", "content": f"{secret} claude"}]
    )
    mock.post("/_control", json={"fail_next": 1, "fail_status": 503})
    retried = chat.with_raw_response.create(
        model="gpt-5.4", messages=[{"role": "user", "content": f"{secret} retried"}]
    )
    with pytest.raises(openai.NotFoundError) as unknown:
        chat.create(model="no-such-model", messages=[{"role": "user", "content": secret}])
    answers = [
        plain.parse().choices[0].message.content,
        streamed,
        messages.parse().content[0].text,  # type: ignore[union-attr]
        retried.parse().choices[0].message.content,
    ]
    assert all(answer and secret in answer for answer in answers)  # so the text below is looked for
    ids = {
        "plain": plain.headers["x-gateway-request-id"],
        "stream": stream.response.headers["x-gateway-request-id"],
        "messages": messages.headers["x-gateway-request-id"],
        "retried": retried.headers["x-gateway-request-id"],
        "unknown": unknown.value.response.headers["x-gateway-request-id"],
    }
    spans = traced.exported(
        {ids["plain"]: 1, ids["stream"]: 1, ids["messages"]: 1, ids["retried"]: 2, ids["unknown"]: 0}
    )

    server = {name: _server_span(spans, rid) for name, rid in ids.items()}
    attempts = {name: _attempt_spans(spans, server[name]) for name in ids}

    # the client's trace is continued; the others start their own
    assert server["plain"]["trace_id"] == trace_id
    assert server["plain"]["parent_span_id"] == parent_id
    assert server["plain"]["trace_state"] == "vendor=opaque"
    assert all(server[name]["parent_span_id"] == "" for name in ("stream", "messages", "retried"))
    assert len({span["trace_id"] for span in server.values()}) == len(ids)

    plain_attributes = server["plain"]["attributes"]
    assert server["plain"]["name"] == "POST /v1/chat/completions"
    assert server["plain"]["resource"]["service.name"] == "gateway-e2e"
    assert plain_attributes["gen_ai.operation.name"] == "chat"
    assert plain_attributes["gen_ai.system"] == plain_attributes["gen_ai.provider.name"] == "openai"
    assert plain_attributes["gen_ai.request.model"] == plain_attributes["gen_ai.response.model"] == "gpt-5.4"
    assert plain_attributes["gen_ai.request.max_tokens"] == 40
    assert plain_attributes["gen_ai.request.temperature"] == pytest.approx(0.3)
    assert plain_attributes["gen_ai.usage.input_tokens"] == plain.parse().usage.prompt_tokens  # type: ignore[union-attr]
    assert plain_attributes["gen_ai.usage.output_tokens"] == plain.parse().usage.completion_tokens  # type: ignore[union-attr]
    assert plain_attributes["http.response.status_code"] == 200
    assert plain_attributes["gateway.tenant"] == traced.tenant
    assert plain_attributes["gateway.action"] == plain.headers["x-gateway-action"] == "forward"
    assert plain_attributes["gateway.cost_usd"] == pytest.approx(float(plain.headers["x-gateway-cost-usd"]))
    assert plain_attributes["gateway.saving_usd"] == pytest.approx(
        float(plain.headers["x-gateway-saving-usd"])
    )
    assert plain_attributes["gateway.cost_usd"] > 0
    assert "gateway.band" in plain_attributes

    (attempt,) = attempts["plain"]
    assert attempt["name"] == "chat gpt-5.4"
    assert attempt["trace_id"] == trace_id
    assert attempt["attributes"]["server.address"] == "127.0.0.1"
    assert attempt["attributes"]["http.response.status_code"] == 200
    assert (
        attempt["attributes"]["gen_ai.usage.output_tokens"] == plain_attributes["gen_ai.usage.output_tokens"]
    )
    assert (
        server["plain"]["start_ns"] <= attempt["start_ns"] <= attempt["end_ns"] <= server["plain"]["end_ns"]
    )

    stream_attributes = server["stream"]["attributes"]
    assert stream_attributes["gateway.stream"] is True
    assert stream_attributes["gen_ai.usage.output_tokens"] > 0
    (streamed_attempt,) = attempts["stream"]
    assert streamed_attempt["end_ns"] <= server["stream"]["end_ns"]

    claude = server["messages"]
    assert claude["name"] == "POST /v1/messages"
    assert claude["attributes"]["gen_ai.system"] == "anthropic"
    assert claude["attributes"]["gen_ai.request.max_tokens"] == 64
    assert claude["attributes"]["gen_ai.usage.input_tokens"] > 0
    assert attempts["messages"][0]["attributes"]["gen_ai.provider.name"] == "anthropic"

    failed, answered = attempts["retried"]  # each attempt its own span, in order
    assert failed["attributes"]["error.type"] == "503"
    assert failed["status"]["code"] == ERROR
    assert answered["attributes"]["http.response.status_code"] == 200
    assert "error.type" not in answered["attributes"]
    assert failed["end_ns"] <= answered["start_ns"]
    assert server["retried"]["attributes"]["gateway.attempts"] == 2

    refused = server["unknown"]["attributes"]
    assert refused["http.response.status_code"] == 404
    assert refused["error.type"] == "model_not_found"
    assert refused["gateway.action"] == "none"

    # nothing the client wrote or the model answered left the gateway
    exported = traced.spans.read_bytes() + traced.spans.with_name(traced.spans.name + ".raw").read_bytes()
    assert secret.encode() not in exported
    for answer in answers:
        assert answer.encode() not in exported


def _server_span(spans: list[dict[str, Any]], request_id: str) -> dict[str, Any]:
    (span,) = [
        span
        for span in spans
        if span["kind"] == SERVER and span["attributes"].get("gateway.request_id") == request_id
    ]
    return span


def _attempt_spans(spans: list[dict[str, Any]], server: dict[str, Any]) -> list[dict[str, Any]]:
    children = [span for span in spans if span["parent_span_id"] == server["span_id"]]
    assert all(child["kind"] == CLIENT and child["trace_id"] == server["trace_id"] for child in children)
    return sorted(children, key=lambda child: child["attributes"]["gateway.attempt"])


def test_tracing_turned_on_by_the_config_file_alone(
    tmp_path: Path, mock_url: str, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_SERVICE_NAME"):
        monkeypatch.delenv(name, raising=False)
    suffix = uuid.uuid4().hex[:8]
    tenant, key = f"configured-{suffix}", f"sk-configured-{suffix}"
    out = tmp_path / "spans.jsonl"
    with receiver(out) as endpoint:
        config = config_for(mock_url, {"main": (tenant, key)})
        config["telemetry"] = {"enabled": True, "endpoint": endpoint, "service_name": "from-config"}
        path = write_config(tmp_path / "gateway.yaml", config)
        with gateway_process(path, redis_url, tmp_path, extra_env={"OTEL_BSP_SCHEDULE_DELAY": "100"}) as url:
            traced = Traced(url, key, tenant, out)
            answer = traced.anthropic().messages.with_raw_response.create(
                model="claude-sonnet-4-5", max_tokens=32, messages=[{"role": "user", "content": "Hi"}]
            )
            request_id = answer.headers["x-gateway-request-id"]
            spans = traced.exported({request_id: 1})
    server = _server_span(spans, request_id)
    assert server["resource"]["service.name"] == "from-config"
    assert server["attributes"]["gen_ai.provider.name"] == "anthropic"
    assert server["attributes"]["gateway.tenant"] == tenant
