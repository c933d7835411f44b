"""``report_prompt_tokens: received``: a tenant's usage shows the prompt as it sent it, not as compacted."""

from __future__ import annotations

import time
from pathlib import Path

import orjson
import pytest

from gateway.core.streaming import ChatStreamReader
from gateway.core.usage_report import reported, rewrite_answer, rewrite_event
from gateway.fronts.responses.reply import Reporter
from tests.gateway.test_compression_pipeline import Upstream, compression_config, history, serving, tokens_of


def test_reported_usage_shows_the_received_prompt_and_keeps_the_rest() -> None:
    chat = {
        "prompt_tokens": 9,
        "completion_tokens": 3,
        "total_tokens": 12,
        "prompt_tokens_details": {"cached_tokens": 4},
    }
    assert reported(chat, 300_000) == {**chat, "prompt_tokens": 300_000, "total_tokens": 300_003}
    responses = {"input_tokens": 9, "output_tokens": 5, "total_tokens": 14}
    assert reported(responses, 100) == {"input_tokens": 100, "output_tokens": 5, "total_tokens": 105}
    assert rewrite_answer({"id": "x"}, 100) is None


def test_a_chat_stream_usage_chunk_is_rewritten_and_the_rest_passes_unchanged() -> None:
    delta = b'data: {"choices":[{"index":0,"delta":{"content":"hi"}}]}'
    usage = b'data: {"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":1,"total_tokens":10}}'
    stream = delta + b"\n\n" + usage + b"\n\ndata: [DONE]\n\n"
    reader = ChatStreamReader(strip_usage_chunk=False, started=time.perf_counter(), report_prompt_tokens=500)
    out = reader.feed(stream)
    events = out.split(b"\n\n")
    assert events[0] == delta and events[2] == b"data: [DONE]"
    assert orjson.loads(events[1][6:])["usage"] == {
        "prompt_tokens": 500,
        "completion_tokens": 1,
        "total_tokens": 501,
    }
    assert reader.usage == {
        "prompt_tokens": 9,
        "completion_tokens": 1,
        "total_tokens": 10,
    }  # billed as reported upstream


def test_a_responses_final_event_is_rewritten_across_chunk_boundaries() -> None:
    final = b"event: response.completed\ndata: " + orjson.dumps(
        {
            "type": "response.completed",
            "response": {"id": "r", "usage": {"input_tokens": 7, "output_tokens": 2}},
        }
    )
    delta = b'event: response.output_text.delta\ndata: {"type":"response.output_text.delta","delta":"x"}'
    stream = delta + b"\n\n" + final + b"\n\n"
    reporter = Reporter(1_000)
    out = reporter.feed(stream[:50]) + reporter.feed(stream[50:]) + reporter.rest()
    first, second, _ = out.split(b"\n\n")
    assert first == delta
    assert second.startswith(b"event: response.completed\ndata: ")
    assert orjson.loads(second.split(b"data: ", 1)[1])["response"]["usage"]["input_tokens"] == 1_000
    assert rewrite_event(delta, 5) == delta


@pytest.mark.anyio
@pytest.mark.parametrize("report", ["forwarded", "received"])
async def test_a_compacted_answer_reports_the_prompt_as_the_tenant_chose(
    tmp_path: Path, redis_url: str, tenant_name: str, report: str
) -> None:
    messages = history(260)
    config = compression_config(tenant_name)
    config["tenants"][tenant_name]["report_prompt_tokens"] = report
    async with serving(tmp_path, redis_url, Upstream(), config) as served:
        answer = await served.chat(messages)
    assert answer.headers["x-gateway-action"] == "compress", answer.text
    usage = answer.json()["usage"]
    expected = tokens_of(messages) if report == "received" else 9  # the upstream's own count
    assert (
        usage["prompt_tokens"] == expected and usage["total_tokens"] == expected + usage["completion_tokens"]
    )
