"""Benchmark of the sampler: its cost on the request path, the writer's throughput, and the report's work.

Run: ``.venv/bin/python -m tests.bench.bench_sampling``. Starts its own Redis (embedded, TCP, no
persistence). Prints one table: the observer's CPU per request (not sampled, sampled, probe), the
background writer's samples per second into Redis, reading and reporting 100,000 samples, rendering the
HTML, and building probe haystacks with the gateway's tokenizer.
"""

from __future__ import annotations

import asyncio
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import redis.asyncio as aioredis

from gateway.base.record import RequestRecord
from gateway.base.types import Tenant, Usage
from gateway.commands.probes import tokenizer_for
from gateway.config.schema.sampling import SamplingConfig
from gateway.redis.server import EmbeddedRedis
from gateway.sampling.keys import SamplingKeys
from gateway.sampling.observer import Sampler
from gateway.sampling.probes.haystack import build_prompt
from gateway.sampling.probes.needle import make_needle
from gateway.sampling.report.html import render_html
from gateway.sampling.report.reader import SampleReader
from gateway.sampling.report.report import build_report
from gateway.sampling.store import SampleWriter
from tests.gateway.test_sampling_factories import planted_signals
from tests.ports import free_port

ROWS: list[tuple[str, str, str]] = []


def row(name: str, value: str, note: str = "") -> None:
    ROWS.append((name, value, note))
    print(f"  {name}: {value} {note}", flush=True)


def record(n: int, *, probe: bool = False) -> RequestRecord:
    return RequestRecord(
        request_id=f"req_{n:024x}",
        endpoint="chat",
        tenant=Tenant(name="acme", key_id="k"),
        requested_model="gpt-5.4",
        called_model="gpt-5.4",
        stream=True,
        status=200,
        prompt_tokens=12_000,
        usage=Usage(input_tokens=12_000, output_tokens=300),
        finish_reason="stop",
        upstream_seconds=2.0,
        first_token_seconds=0.4,
        total_seconds=2.1,
        probe=probe,
    )


class Discard:
    def record(self, signal: object) -> None:
        return None


def per_call_us(
    call: Callable[[RequestRecord], None], records: list[RequestRecord], repeats: int = 5
) -> float:
    runs = []
    for _ in range(repeats):
        started = time.process_time()
        for item in records:
            call(item)
        runs.append((time.process_time() - started) / len(records) * 1e6)
    return statistics.median(runs)


def bench_observer() -> None:
    records = [record(n) for n in range(50_000)]
    probes = [record(n, probe=True) for n in range(50_000)]
    off, on, default_config = SamplingConfig(rate=0.0), SamplingConfig(rate=1.0), SamplingConfig()
    never = Sampler(Discard(), config=lambda: off)  # the pipeline reads the config already built
    default = Sampler(Discard(), config=lambda: default_config)
    always = Sampler(Discard(), config=lambda: on)
    row("observer, not sampled (rate 0)", f"{per_call_us(never, records):.2f} us/request", "(hash + compare)")
    row("observer, default rate 5%", f"{per_call_us(default, records):.2f} us/request")
    row("observer, sampled (signal built)", f"{per_call_us(always, records):.2f} us/request")
    row("observer, probe (always sampled)", f"{per_call_us(never, probes):.2f} us/request")


async def bench_redis(url: str) -> None:
    client = aioredis.Redis.from_url(url)
    signals = planted_signals(cliff_at=250_000, per_bucket=20_000, error_rate_after=0.2)[:100_000]
    config = SamplingConfig(stream_maxlen=200_000, queue_size=200_000, batch_size=200)
    writer = SampleWriter(client, config=lambda: config)
    await writer.start()
    started = time.perf_counter()
    for signal in signals:
        writer.record(signal)
    queued = time.perf_counter() - started
    await writer.drain()
    elapsed = time.perf_counter() - started
    await writer.close()
    stats = writer.stats()
    row("writer.record (enqueue)", f"{queued / len(signals) * 1e6:.2f} us/sample")
    row(
        "writer throughput into Redis",
        f"{stats.written / elapsed:,.0f} samples/s",
        f"({stats.written:,} written)",
    )
    memory = await client.memory_usage(SamplingKeys().samples("gpt-5.4"))
    row(
        "Redis memory per sample",
        f"{(memory or 0) / stats.written:.0f} bytes",
        "(MEMORY USAGE of the stream)",
    )

    reader = SampleReader(client)
    started = time.perf_counter()
    back = await reader.samples("gpt-5.4")
    row("read 100K samples (XREVRANGE pages)", f"{time.perf_counter() - started:.2f} s", f"({len(back):,})")
    started = time.perf_counter()
    report = build_report(back, [], model="gpt-5.4", since=0, until=time.time())
    row("build_report over 100K samples", f"{time.perf_counter() - started:.2f} s")
    started = time.perf_counter()
    page = render_html(report)
    row("render_html", f"{(time.perf_counter() - started) * 1000:.1f} ms", f"({len(page):,} bytes)")
    await client.aclose()


def bench_haystack() -> None:
    tokenizer = tokenizer_for("gpt-5.4", approximate=False)
    for length in (32_000, 128_000, 256_000):
        rng = random.Random(length)
        started = time.perf_counter()
        prompt = build_prompt(
            target_tokens=length, depth=0.5, needle=make_needle(rng), tokenizer=tokenizer, rng=rng
        )
        elapsed = time.perf_counter() - started
        row(
            f"haystack {length // 1000}K tokens",
            f"{elapsed * 1000:.0f} ms",
            f"(counted {prompt.prompt_tokens:,})",
        )


def main() -> None:
    print("sampling benchmark")
    bench_observer()
    with (
        tempfile.TemporaryDirectory() as directory,
        EmbeddedRedis(Path(directory), port=free_port(), persist=False) as server,
    ):
        asyncio.run(bench_redis(server.url))
    bench_haystack()
    width = max(len(name) for name, _, _ in ROWS)
    print()
    print(f"{'measure'.ljust(width)}  value")
    print(f"{'-' * width}  {'-' * 30}")
    for name, value, note in ROWS:
        print(f"{name.ljust(width)}  {value} {note}".rstrip())


if __name__ == "__main__":
    main()
