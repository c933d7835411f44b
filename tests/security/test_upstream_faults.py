"""Faults of the upstream: a success that is not JSON, attempts that time out, malformed stream fields.

A 200 whose body is not the JSON object the call returns is an upstream error (502 with the cause) and is
billed only for what the provider reports (nothing); an attempt that timed out after its request went out
is recorded as an estimated cost event, and counted, estimated, in the cost the answer tells; a stream
field of the wrong shape never cuts the stream.
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import respx

from tests.factories import (
    TENANT_KEY,
    UPSTREAM,
    chat_body,
    completion,
    gateway_client,
    make_config,
)
from tests.gateway.test_streaming import streamed
from tests.security.conftest import app_events


def tenant_config(tenant: str) -> dict[str, Any]:
    return make_config(tenants={tenant: {"keys": [TENANT_KEY]}})


@pytest.mark.parametrize(
    ("content", "content_type"),
    [
        (b"<html><body>502 Bad Gateway</body></html>", "text/html"),
        (b'{"id": "chatcmpl-1", "choices": [', "application/json"),
        (b'["not", "an", "object"]', "application/json"),
    ],
    ids=["html", "cut-json", "json-array"],
)
def test_a_success_that_is_not_json_is_an_upstream_error_and_is_not_billed(
    tmp_path: Path, redis_url: str, tenant_name: str, content: bytes, content_type: str
) -> None:
    router = respx.Router()
    route = router.post(f"{UPSTREAM}/chat/completions").mock(
        side_effect=[
            httpx.Response(200, content=content, headers={"content-type": content_type}),
            httpx.Response(200, json=completion()),
        ]
    )
    with gateway_client(tmp_path, redis_url, router, config=tenant_config(tenant_name)) as client:
        broken = client.post("/v1/chat/completions", json=chat_body())
        marker = client.post("/v1/chat/completions", json=chat_body())
        stored = app_events(client, tenant_name, until=marker.headers["x-gateway-request-id"])
    assert broken.status_code == 502
    error = broken.json()["error"]
    assert error["code"] == "upstream_invalid_response" and "not a JSON object" in error["message"]
    assert route.call_count == 2  # not retried: the provider may have run it
    assert [event["id"] for event in stored] == [marker.headers["x-gateway-request-id"]]


def test_an_attempt_that_timed_out_is_recorded_as_an_estimated_cost(
    tmp_path: Path, redis_url: str, tenant_name: str
) -> None:
    router = respx.Router()
    router.post(f"{UPSTREAM}/chat/completions").mock(
        side_effect=[httpx.ReadTimeout("no answer in time"), httpx.Response(200, json=completion())]
    )
    with gateway_client(tmp_path, redis_url, router, config=tenant_config(tenant_name)) as client:
        answer = client.post("/v1/chat/completions", json=chat_body())
        request_id = answer.headers["x-gateway-request-id"]
        stored = app_events(client, tenant_name, until=request_id)
    assert answer.status_code == 200
    timed_out = [event for event in stored if event["action"] == "timeout"]
    assert len(timed_out) == 1
    assert timed_out[0]["parent_id"] == request_id and timed_out[0]["estimated"] is True
    assert timed_out[0]["input_tokens"] == int(answer.headers["x-gateway-prompt-tokens"])
    assert timed_out[0]["cost_usd"] != "0.000000000"
    # the caller is told the same total, the timed-out attempt's part an estimate
    assert answer.headers["x-gateway-cost-estimated"] == "true"
    told = Decimal(answer.headers["x-gateway-cost-usd"])
    assert told == sum(Decimal(e["cost_usd"]) for e in stored if request_id in (e["id"], e["parent_id"]))


def test_a_request_whose_every_attempt_timed_out_records_each(
    tmp_path: Path, redis_url: str, tenant_name: str
) -> None:
    router = respx.Router()
    router.post(f"{UPSTREAM}/chat/completions").mock(side_effect=httpx.ReadTimeout("no answer in time"))
    with gateway_client(tmp_path, redis_url, router, config=tenant_config(tenant_name)) as client:
        failed = client.post("/v1/chat/completions", json=chat_body())
        request_id = failed.headers["x-gateway-request-id"]
        stored = app_events(client, tenant_name, until=f"{request_id}:timeout:6")
    assert failed.status_code == 502 and failed.json()["error"]["code"] == "upstream_unavailable"
    mine = [event for event in stored if event["parent_id"] == request_id]
    assert len(mine) == 6  # 3 attempts on gpt-5.4, then 3 on its fallback gpt-5.2
    assert {event["model"] for event in mine} == {"gpt-5.4", "gpt-5.2"}


def sse(*payloads: object) -> bytes:
    return b"".join(
        b"data: " + (p if isinstance(p, bytes) else orjson.dumps(p)) + b"\n\n" for p in (*payloads, b"[DONE]")
    )


MALFORMED_CHUNKS: tuple[object, ...] = (
    {"choices": [{"index": 0, "delta": "not an object"}]},
    {"choices": 5},
    {"choices": "abc", "usage": "lots"},
    {"choices": [{"index": 0, "delta": {"content": "Hel", "tool_calls": 7}}]},
    {"choices": [{"index": 0, "delta": {"tool_calls": [{"function": "f"}, 3]}, "finish_reason": 9}]},
    {"choices": [{"index": 0, "delta": {"content": "lo"}, "finish_reason": "stop"}]},
    b"{not json",
)
USAGE = {"prompt_tokens": 9, "completion_tokens": 2, "total_tokens": 11}
MALFORMED = sse(*MALFORMED_CHUNKS, {"choices": [], "usage": USAGE})


def test_malformed_stream_fields_do_not_cut_a_stream(
    tmp_path: Path, redis_url: str, tenant_name: str
) -> None:
    router = respx.Router()
    router.post(f"{UPSTREAM}/chat/completions").mock(side_effect=lambda request: streamed(MALFORMED))
    body = chat_body(stream=True, stream_options={"include_usage": True})
    with gateway_client(tmp_path, redis_url, router, config=tenant_config(tenant_name)) as client:
        with client.stream("POST", "/v1/chat/completions", json=body) as answer:
            relayed = b"".join(answer.iter_raw())
        request_id = answer.headers["x-gateway-request-id"]
        [event] = [e for e in app_events(client, tenant_name, until=request_id) if e["id"] == request_id]
    # relayed as it came, but for the cost the gateway adds to the usage
    told = orjson.loads(relayed.split(b"\n\n")[-3].removeprefix(b"data: "))["usage"]
    fields = {name: value for name, value in told.items() if name.startswith("x_gateway_")}
    assert answer.status_code == 200
    assert relayed == sse(*MALFORMED_CHUNKS, {"choices": [], "usage": {**USAGE, **fields}})
    assert Decimal(fields["x_gateway_cost_usd"]) == Decimal(event["cost_usd"]) > 0
    assert event["input_tokens"] == 9 and event["output_tokens"] == 2 and event["estimated"] is False
