"""Through the real app and pipeline: sampled requests leave signals in Redis, never prompt or completion
text."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import orjson
import pytest
import redis.asyncio as aioredis
import respx

from gateway.config.schema.root import ProviderConfig
from gateway.config.schema.sampling import SamplingConfig
from gateway.config.settings import Settings
from gateway.edge.app import create_app
from gateway.sampling.keys import SamplingKeys
from gateway.sampling.observer import Sampler
from gateway.sampling.report.reader import SampleReader
from gateway.sampling.store import SampleWriter
from tests.factories import TENANT_KEY, UPSTREAM, chat_body, completion, make_config, write_config

SECRET_PROMPT = "the launch code is ZEBRA-PAPAYA-7781 and my password is hunter2"
SECRET_ANSWER = "I will never reveal OCTOPUS-MANGO-4410 to anyone"


def _sse(text: str) -> bytes:
    chunks = [
        {
            "choices": [
                {"index": 0, "delta": {"role": "assistant", "content": text[:20]}, "finish_reason": None}
            ]
        },
        {"choices": [{"index": 0, "delta": {"content": text[20:]}, "finish_reason": None}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        {"choices": [], "usage": {"prompt_tokens": 30, "completion_tokens": 12, "total_tokens": 42}},
    ]
    events = [b"data: " + orjson.dumps({"id": "c", "object": "chat.completion.chunk", **c}) for c in chunks]
    return b"\n\n".join([*events, b"data: [DONE]"]) + b"\n\n"


def _upstream(request: httpx.Request) -> httpx.Response:
    body = orjson.loads(request.content)
    if body.get("stream"):
        payload = _sse(SECRET_ANSWER)

        async def pieces() -> AsyncIterator[bytes]:
            for start in range(0, len(payload), 16):
                yield payload[start : start + 16]

        return httpx.Response(200, content=pieces(), headers={"content-type": "text/event-stream"})
    return httpx.Response(200, json=completion(SECRET_ANSWER))


@pytest.mark.anyio
@pytest.mark.parametrize("capture", [False, True])
async def test_sampled_requests_store_signals_and_no_text(
    tmp_path: Path, redis_url: str, redis_client: aioredis.Redis, tenant_name: str, capture: bool
) -> None:
    prefix = f"gwtest-{tenant_name}"
    config = SamplingConfig(rate=1.0, key_prefix=prefix, capture_tenants=("acme",) if capture else ())
    router = respx.Router(assert_all_called=False)
    router.post(f"{UPSTREAM}/chat/completions").mock(side_effect=_upstream)

    def factory(provider: ProviderConfig) -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=httpx.MockTransport(router.async_handler))

    # the file's own sampling samples nothing: only the sampler added below writes, under this test's prefix
    gateway_yaml = write_config(tmp_path / "gateway.yaml", make_config(sampling={"rate": 0.0}))
    settings = Settings(config=gateway_yaml, redis_url=redis_url, data_dir=tmp_path / "data")
    app = create_app(settings, client_factory=factory)
    headers = {"authorization": f"Bearer {TENANT_KEY}"}
    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": SECRET_PROMPT}]
    writer = SampleWriter(redis_client, config=lambda: config)
    async with app.router.lifespan_context(app):
        pipeline = app.state.gateway.pipeline
        pipeline.observers = (*pipeline.observers, Sampler(writer, config=lambda: config))
        await writer.start()
        try:
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url="http://gw") as client:
                plain = await client.post(
                    "/v1/chat/completions",
                    json=chat_body(messages=messages),
                    headers={**headers, "x-request-id": "r1"},
                )
                streamed = await client.post(
                    "/v1/chat/completions",
                    json=chat_body(messages=messages, stream=True),
                    headers={**headers, "x-request-id": "r2"},
                )
            assert (
                SECRET_ANSWER in plain.text and b"OCTOPUS" in streamed.content
            )  # the client got its answers
            await writer.drain()
        finally:
            await writer.close()

    keys = [key async for key in redis_client.scan_iter(match=f"{prefix}:*")]
    try:
        signals = await SampleReader(redis_client, keys=SamplingKeys(prefix)).samples("gpt-5.4")
        ids = [plain.headers["x-gateway-request-id"], streamed.headers["x-gateway-request-id"]]
        assert [signal.request_id for signal in signals] == ids
        assert [signal.stream for signal in signals] == [False, True]
        assert signals[1].output_tokens == 12 and signals[1].ttft is not None
        assert signals[0].output_tokens == 3 and signals[0].finish_reason == "stop"
        assert all(signal.tenant == "acme" and signal.status == 200 for signal in signals)
        if capture:  # a length only (the pipeline counts the characters of streamed answers)
            assert signals[1].output_chars == len(SECRET_ANSWER)
            assert signals[0].output_chars is not None
        else:
            assert [signal.output_chars for signal in signals] == [None, None]

        stored = b""
        for key in keys:
            stored += await redis_client.dump(key) or b""
            if await redis_client.type(key) == b"stream":
                for _, fields in await redis_client.xrange(key):
                    stored += b"".join(k + b"=" + v for k, v in fields.items())
        for secret in ("ZEBRA", "PAPAYA", "hunter2", "OCTOPUS", "MANGO", "be brief", "launch code"):
            assert secret.encode() not in stored
    finally:
        if keys:
            await redis_client.delete(*keys)
