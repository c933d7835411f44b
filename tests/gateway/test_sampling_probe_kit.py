"""The probe kit end to end: ``gateway probe run`` sends needle probes through a real gateway (served by
uvicorn on a port) to an upstream that answers correctly below a planted length and wrongly above it; the
kit must find that boundary, store its results, and ``gateway probes report`` must show them."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import httpx
import orjson
import pytest
import redis
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gateway.cli import main
from gateway.config.schema.root import ProviderConfig
from gateway.config.settings import Settings
from gateway.edge.app import create_app
from gateway.sampling.keys import SamplingKeys
from gateway.sampling.probes.needle import ProbeResult
from gateway.tokens.vocab import load_vocabulary
from tests.factories import ADMIN_KEY, TENANT_KEY, make_config, write_config
from tests.ports import free_port

PLANTED_TOKENS = 3_000
FACT = re.compile(r"The access code for the (\S+) archive is (\S+)\.")


@cache
def _encoding():  # type: ignore[no-untyped-def]
    return load_vocabulary("o200k_base").encoding


def planted_upstream(seen: list[dict[str, object]]) -> Starlette:
    """Recalls the fact while the prompt is under ``PLANTED_TOKENS`` tokens, answers a wrong code above."""

    async def chat(request: Request) -> Response:
        body = orjson.loads(await request.body())
        text = "\n".join(message["content"] for message in body["messages"])
        tokens = len(_encoding().encode_ordinary(text))
        match = FACT.search(text)
        code = match.group(2) if match and tokens < PLANTED_TOKENS else "1111-ZZZ-2222"
        seen.append({"tokens": tokens, "recalled": code != "1111-ZZZ-2222"})
        usage = {"prompt_tokens": tokens, "completion_tokens": 6, "total_tokens": tokens + 6}
        reply = {
            "id": "chatcmpl-planted", "object": "chat.completion", "created": 1, "model": body["model"],
            "choices": [{"index": 0, "message": {"role": "assistant", "content": f"The code is {code}."},
                         "finish_reason": "stop"}],
            "usage": usage,
        }  # fmt: skip
        return Response(orjson.dumps(reply), media_type="application/json")

    return Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])])


@pytest.fixture
def gateway(tmp_path: Path, redis_url: str) -> Iterator[tuple[str, list[dict[str, object]], Path]]:
    seen: list[dict[str, object]] = []
    upstream = planted_upstream(seen)
    config_path = write_config(tmp_path / "gateway.yaml", make_config())
    settings = Settings(
        config=config_path, redis_url=redis_url, admin_key=ADMIN_KEY, data_dir=tmp_path / "data"
    )

    def factory(provider: ProviderConfig) -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=httpx.ASGITransport(upstream))

    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(settings, client_factory=factory), host="127.0.0.1", port=port, log_level="error"
        )
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the gateway did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}", seen, config_path
    finally:
        server.should_exit = True
        thread.join(15)


def test_probe_kit_finds_the_planted_boundary_through_the_gateway(
    gateway: tuple[str, list[dict[str, object]], Path],
    redis_url: str,
    tenant_name: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    url, seen, config_path = gateway
    model = "gpt-5.4"
    prefix = f"gwtest-{tenant_name}"
    config_path.write_text(config_path.read_text() + f"sampling:\n  key_prefix: {prefix}\n")
    keys = SamplingKeys(prefix)
    client = redis.Redis.from_url(redis_url)
    try:
        status = main([
            "probe", "run", "--model", model, "--lengths", "1k,2k,4k,8k", "--depths", "0.1,0.5,0.9",
            "--repeats", "2", "--base-url", url, "--key", TENANT_KEY, "--concurrency", "3",
            "--redis-url", redis_url, "--config", str(config_path),
        ])  # fmt: skip
        out, err = capsys.readouterr()
        assert status == 0, err
        assert len(seen) == 24  # every probe went through the gateway to the upstream
        assert "boundary: 4K (recall 100% at 2K -> 0%)" in out
        assert re.search(r"^2K\s+100% \(2/2\)\s+100% \(2/2\)\s+100% \(2/2\)\s+100% \(6/6\)$", out, re.M)
        assert re.search(r"^4K\s+0% \(0/2\)\s+0% \(0/2\)\s+0% \(0/2\)\s+0% \(0/6\)$", out, re.M)
        assert "exact tokens" in out
        assert "[24/24]" in err  # the progress indicator

        entries = client.xrange(keys.probes(model))
        results = [ProbeResult.from_fields(fields) for _, fields in entries]
        assert len(results) == 24
        assert {result.length for result in results if not result.recalled} == {4_000, 8_000}
        assert all(result.status == 200 and result.answered for result in results)
        assert model.encode() in client.smembers(keys.models())

        report_html = tmp_path / "report.html"
        assert main(["probes", "report", "--model", model, "--redis-url", redis_url,
                       "--config", str(config_path)]) == 0  # fmt: skip
        out, _ = capsys.readouterr()
        assert "needle probe recall (length x depth)" in out
        assert "probe boundary: 4K (recall 100% at 2K -> 0%)" in out
        assert main(["probes", "report", "--model", model, "--redis-url", redis_url, "--config",
                       str(config_path), "--html", str(report_html)]) == 0  # fmt: skip
        assert "Needle probe recall" in report_html.read_text()
    finally:
        client.delete(keys.probes(model), keys.samples(model), keys.models())
        client.close()
