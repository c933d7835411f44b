"""``gateway probe run`` at 0% recall: recall that is nil already at the shortest length is not "recall
held", it is an upstream that is not answering the probe; the command says so and exits non-zero."""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable, Iterator

import orjson
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gateway.cli import main
from gateway.config.schema.sampling import BoundaryConfig, SamplingConfig
from gateway.sampling.probes.recall import recall_grid
from gateway.sampling.report.html import render_html
from gateway.sampling.report.report import build_report
from gateway.sampling.report.table import render_report
from tests.gateway.test_sampling_factories import NOW, make_probe
from tests.ports import free_port

FACT = re.compile(r"The access code for the (\S+) archive is (\S+)\.")
Answer = Callable[[str], str]


def fake_gateway(answer: Answer) -> Starlette:
    """Stands in for the gateway: answers every chat completion with ``answer(prompt text)``."""

    async def chat(request: Request) -> Response:
        body = orjson.loads(await request.body())
        text = "\n".join(message["content"] for message in body["messages"])
        reply = {
            "id": "chatcmpl-fake", "object": "chat.completion", "created": 1, "model": body["model"],
            "choices": [{"index": 0, "message": {"role": "assistant", "content": answer(text)},
                         "finish_reason": "stop"}],
        }  # fmt: skip
        return Response(orjson.dumps(reply), media_type="application/json")

    return Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])])


@pytest.fixture
def serve() -> Iterator[Callable[[Answer], str]]:
    servers: list[tuple[uvicorn.Server, threading.Thread]] = []

    def start(answer: Answer) -> str:
        port = free_port()
        server = uvicorn.Server(
            uvicorn.Config(fake_gateway(answer), host="127.0.0.1", port=port, log_level="error")
        )
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        deadline = time.monotonic() + 20
        while not server.started:
            assert thread.is_alive() and time.monotonic() < deadline, "the fake gateway did not start"
            time.sleep(0.02)
        servers.append((server, thread))
        return f"http://127.0.0.1:{port}"

    yield start
    for server, thread in servers:
        server.should_exit = True
        thread.join(15)


def run_probes(url: str, *extra: str) -> int:
    return main([
        "probe", "run", "--model", "m", "--key", "k", "--lengths", "500,1k", "--depths", "0.1,0.5,0.9",
        "--approximate-tokens", "--no-store", "--base-url", url, *extra,
    ])  # fmt: skip


def test_probe_run_at_zero_recall_says_the_upstream_is_not_answering_and_fails(
    serve: Callable[[Answer], str], capsys: pytest.CaptureFixture[str]
) -> None:
    url = serve(lambda text: "")
    assert run_probes(url) == 1
    out = capsys.readouterr().out
    assert "recall held" not in out
    assert "the upstream is not answering the probe" in out
    assert "0% (0/3) at 500, the shortest length probed" in out


def test_probe_run_at_zero_recall_as_json_says_so_and_fails(
    serve: Callable[[Answer], str], capsys: pytest.CaptureFixture[str]
) -> None:
    url = serve(lambda text: "I cannot find it.")
    assert run_probes(url, "--json") == 1
    body = json.loads(capsys.readouterr().out)
    assert body["answering"] is False and "not answering the probe" in body["verdict"]


def test_probe_run_that_recalls_everywhere_says_recall_held(
    serve: Callable[[Answer], str], capsys: pytest.CaptureFixture[str]
) -> None:
    def recall(text: str) -> str:
        found = FACT.search(text)
        return found.group(2) if found else ""

    assert run_probes(serve(recall)) == 0
    out = capsys.readouterr().out
    assert "boundary: none found (recall held across the probed lengths)" in out
    assert "not answering" not in out


def test_probe_run_when_every_probe_fails_says_the_upstream_is_not_answering(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert run_probes(f"http://127.0.0.1:{free_port()}") == 1
    out = capsys.readouterr().out
    assert "no probe was answered" in out and "recall held" not in out
    assert "the upstream is not answering the probe" in out


def test_silent_upstream_reads_the_shortest_length_probed() -> None:
    from gateway.sampling.report.verdict import silent_upstream

    answered = [make_probe(length=8_000, recalled=True), make_probe(length=32_000, recalled=False)]
    failed = [make_probe(length=4_000, status=502, error="HTTP 502", recalled=False)]
    assert silent_upstream(recall_grid(answered), 8_000) is None
    assert silent_upstream(recall_grid(answered + failed), 4_000) == (
        "no probe at 4K, the shortest length probed, was answered"
    )
    nil = [make_probe(length=8_000, recalled=False, depth=depth) for depth in (0.1, 0.5)]
    assert silent_upstream(recall_grid(nil), 8_000) == "recall is 0% (0/2) at 8K, the shortest length probed"


def test_report_with_probes_at_zero_recall_does_not_say_recall_held() -> None:
    probes = [
        make_probe(length=length, depth=depth, prompt_tokens=length, recalled=False)
        for length in (8_000, 32_000)
        for depth in (0.1, 0.5, 0.9)
    ]
    report = build_report(
        [], probes, model="m", since=NOW - 60, until=NOW,
        config=SamplingConfig(boundary=BoundaryConfig(min_probe_count=3)),
    )  # fmt: skip
    table, page = render_report(report), render_html(report)
    assert "held" not in table and "Recall held" not in page
    assert "probe boundary: none: the upstream is not answering the probe" in table
    assert "the upstream is not answering the probe" in page
