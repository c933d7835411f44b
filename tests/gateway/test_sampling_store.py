from __future__ import annotations

import inspect
import time
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest
import redis.asyncio as aioredis

from gateway.config.schema.sampling import SamplingConfig
from gateway.redis.server import EmbeddedRedis
from gateway.sampling.keys import SamplingKeys
from gateway.sampling.report.reader import SampleReader
from gateway.sampling.store import SampleWriter
from tests.gateway.test_sampling_factories import make_signal
from tests.ports import free_port

KEYS = SamplingKeys()


@pytest.fixture
async def model(redis_client: aioredis.Redis, tenant_name: str) -> AsyncIterator[str]:
    """A model name no other test uses; its keys are removed afterwards."""
    name = f"model-{tenant_name}"
    yield name
    await redis_client.delete(KEYS.samples(name), KEYS.probes(name))
    await redis_client.srem(KEYS.models(), name)  # type: ignore[misc]


@pytest.mark.anyio
async def test_writer_appends_signals_that_read_back_in_order(
    redis_client: aioredis.Redis, model: str
) -> None:
    signals = [make_signal(model=model, request_id=f"req_{n}", prompt_tokens=1000 + n) for n in range(250)]
    async with SampleWriter(redis_client, config=lambda: SamplingConfig(batch_size=64)) as writer:
        for signal in signals:
            writer.record(signal)
        await writer.drain()
        stats = writer.stats()
    assert (stats.recorded, stats.written, stats.dropped_full, stats.dropped_redis) == (250, 250, 0, 0)
    assert await redis_client.xlen(KEYS.samples(model)) == 250
    reader = SampleReader(redis_client)
    assert await reader.samples(model) == signals
    assert model in await reader.models()


@pytest.mark.anyio
async def test_writer_caps_each_stream_with_maxlen(redis_client: aioredis.Redis, model: str) -> None:
    config = SamplingConfig(stream_maxlen=100, batch_size=50)
    async with SampleWriter(redis_client, config=lambda: config) as writer:
        for n in range(2_000):
            writer.record(make_signal(model=model, request_id=f"req_{n}"))
            if n % 100 == 99:
                await writer.drain()
        await writer.drain()
    length = await redis_client.xlen(KEYS.samples(model))
    assert 100 <= length < 300  # MAXLEN ~ trims whole nodes: at least the cap, never the whole history


@pytest.mark.anyio
async def test_writer_drops_and_counts_when_the_queue_is_full(
    redis_client: aioredis.Redis, model: str
) -> None:
    config = SamplingConfig(queue_size=5)
    async with SampleWriter(redis_client, config=lambda: config) as writer:
        for n in range(50):  # no await in between: the writer task cannot run
            writer.record(make_signal(model=model, request_id=f"req_{n}"))
        await writer.drain()
        stats = writer.stats()
    assert (stats.written, stats.dropped_full) == (5, 45)


@pytest.mark.anyio
async def test_writer_holds_samples_while_redis_is_down_and_counts_them_lost_at_close(
    dead_redis: aioredis.Redis,
) -> None:
    assert not inspect.iscoroutinefunction(SampleWriter.record)  # recording never waits on Redis
    config = SamplingConfig(retry_interval_seconds=60)
    writer = SampleWriter(dead_redis, config=lambda: config)
    await writer.start()
    for n in range(300):
        writer.record(make_signal(request_id=f"req_{n}"))
    assert writer.stats().queued == 300  # all handed over, none written yet: the writer has not run
    await writer.drain()
    held = writer.stats()
    await writer.close()
    closed = writer.stats()
    assert (held.recorded, held.written, held.held, held.dropped_redis) == (300, 0, 300, 0)
    assert held.redis_up is False
    assert (closed.held, closed.dropped_redis) == (0, 300)


@pytest.mark.anyio
async def test_writer_holds_at_most_queue_size_samples_dropping_the_oldest(
    dead_redis: aioredis.Redis,
) -> None:
    config = SamplingConfig(queue_size=20, batch_size=5, retry_interval_seconds=60)
    async with SampleWriter(dead_redis, config=lambda: config) as writer:
        for n in range(50):
            writer.record(make_signal(request_id=f"req_{n}"))
            await writer.drain()  # one batch at a time: the queue never fills
        stats = writer.stats()
    assert (stats.recorded, stats.dropped_full, stats.held, stats.dropped_redis) == (50, 0, 20, 30)


@pytest.mark.anyio
async def test_writer_writes_what_it_held_once_redis_is_back(tmp_path: Path, model: str) -> None:
    port = free_port()
    config = SamplingConfig(retry_interval_seconds=0.05, write_timeout_seconds=0.5)
    server = EmbeddedRedis(tmp_path / "redis", port=port, persist=False)
    server.start()
    client = aioredis.Redis.from_url(server.url, socket_connect_timeout=0.2, retry=None)
    try:
        async with SampleWriter(client, config=lambda: config) as writer:
            writer.record(make_signal(model=model, request_id="req_before"))
            await writer.drain()
            server.stop()
            for n in range(40):
                writer.record(make_signal(model=model, request_id=f"req_{n}"))
            await writer.drain()
            down = writer.stats()
            server.start()
            with anyio.fail_after(10):
                while writer.stats().held:  # retried on its own, every retry interval
                    await anyio.sleep(0.05)
            back = writer.stats()
        assert (down.written, down.held, down.redis_up) == (1, 40, False)
        assert (back.written, back.held, back.dropped_redis, back.redis_up) == (41, 0, 0, True)
        assert await client.xlen(KEYS.samples(model)) == 40  # the server kept nothing: only what came back
        assert model.encode() in await client.smembers(KEYS.models())  # type: ignore[misc]
    finally:
        await client.aclose()
        server.stop()


@pytest.mark.anyio
async def test_writer_record_before_start_is_dropped_not_raised(redis_client: aioredis.Redis) -> None:
    writer = SampleWriter(redis_client)
    writer.record(make_signal())
    assert writer.stats().dropped_full == 1
    await writer.close()


@pytest.mark.anyio
async def test_reader_window_limit_and_unreadable_entries(redis_client: aioredis.Redis, model: str) -> None:
    key = KEYS.samples(model)
    for n in range(30):
        await redis_client.xadd(key, make_signal(model=model, request_id=f"req_{n}").to_fields())  # type: ignore[arg-type]
    await redis_client.xadd(key, {"junk": "1"})
    reader = SampleReader(redis_client)
    assert len(await reader.samples(model)) == 30
    newest = await reader.samples(model, limit=10)
    assert [signal.request_id for signal in newest] == [f"req_{n}" for n in range(20, 30)]
    future_ms = int((time.time() + 3600) * 1000)
    assert await reader.samples(model, since_ms=future_ms) == []
    assert len(await reader.samples(model, until_ms=int(time.time() * 1000) - 3_600_000)) == 0


@pytest.mark.anyio
async def test_the_first_sample_waits_for_others_and_drain_and_close_cut_the_wait_short(
    redis_client: aioredis.Redis, model: str
) -> None:
    config = SamplingConfig(linger_seconds=10)
    writer = SampleWriter(redis_client, config=lambda: config)
    await writer.start()
    writer.record(make_signal(model=model, request_id="req_first"))
    await anyio.sleep(0.2)  # the writer has the first sample in hand, and waits for more
    assert (writer.stats().written, await redis_client.xlen(KEYS.samples(model))) == (0, 0)
    writer.record(make_signal(model=model, request_id="req_second"))
    with anyio.fail_after(5):  # well inside the linger: drain asks for the samples now
        await writer.drain()
    assert (writer.stats().written, await redis_client.xlen(KEYS.samples(model))) == (2, 2)
    writer.record(make_signal(model=model, request_id="req_third"))
    with anyio.fail_after(5):  # and so does close
        await writer.close()
    assert (writer.stats().written, await redis_client.xlen(KEYS.samples(model))) == (3, 3)
