"""Shared parts of the HTTP benchmarks: processes pinned to cores, an open-loop and a closed-loop load
generator (aiohttp, in this process), and per-process CPU and memory (peak RSS; RSS, PSS and USS) read from
/proc."""

from __future__ import annotations

import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import aiohttp

from tests.e2e.processes import ROOT, wait_until_up

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def pinned(args: list[str], core: int | None) -> list[str]:
    if core is None or shutil.which("taskset") is None or (os.cpu_count() or 1) < 2:
        return args
    return ["taskset", "-c", str(core), *args]


@contextmanager
def process(
    args: list[str], health_url: str, *, env: dict[str, str], log: Path, timeout: float = 20.0
) -> Iterator[subprocess.Popen[bytes]]:
    with log.open("wb") as out:
        proc = subprocess.Popen(
            args, cwd=ROOT, env={**os.environ, **env}, stdout=out, stderr=subprocess.STDOUT
        )
        try:
            wait_until_up(health_url, proc, timeout)
            yield proc
        finally:
            proc.terminate()
            proc.wait(15)


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def peak_rss_mib(pid: int, field: str = "VmHWM") -> float:
    """Peak resident memory (``VmRSS`` for the current one) of a process, in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    return float("nan")


@dataclass(frozen=True, slots=True)
class Memory:
    """A process's memory in MiB: resident (RSS), its share of pages it shares counted in proportion
    (PSS; the PSS of all processes adds up to what they use together), and what only it maps (USS)."""

    rss: float
    pss: float
    uss: float


def memory_mib(pid: int) -> Memory:
    """RSS, PSS and USS of a process, from ``/proc/PID/smaps_rollup``."""
    fields: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:]:
        name, value = line.split(":", 1)
        fields[name] = int(value.split()[0])
    private = fields["Private_Clean"] + fields["Private_Dirty"]
    return Memory(rss=fields["Rss"] / 1024, pss=fields["Pss"] / 1024, uss=private / 1024)


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


@dataclass
class Sample:
    total: float
    first_byte: float


Request = Callable[[aiohttp.ClientSession], Awaitable[Sample]]


def post_json(url: str, body: bytes, headers: dict[str, str]) -> Request:
    async def send(session: aiohttp.ClientSession) -> Sample:
        start = time.perf_counter()
        async with session.post(url, data=body, headers=headers) as response:
            first: float | None = None
            async for _ in response.content.iter_any():
                if first is None:
                    first = time.perf_counter() - start
            if response.status != 200:
                raise RuntimeError(f"{url} answered {response.status}")
        return Sample(time.perf_counter() - start, first if first is not None else float("nan"))

    return send


async def open_loop(requests: list[Request], rate: float, seconds: float) -> list[list[Sample]]:
    """Send at a fixed rate regardless of answers, cycling through ``requests`` (interleaved targets)."""
    results: list[list[Sample]] = [[] for _ in requests]
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
        tasks = []
        start = time.perf_counter()
        count = int(rate * seconds)
        for i in range(count):
            delay = start + i / rate - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            which = i % len(requests)

            async def one(which: int = which) -> None:
                results[which].append(await requests[which](session))

            tasks.append(asyncio.create_task(one()))
        await asyncio.gather(*tasks)
    return results


async def closed_loop(request: Request, concurrency: int, seconds: float) -> tuple[int, float]:
    """As many requests as ``concurrency`` workers can push; returns (completed, elapsed seconds)."""
    done = 0
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
        deadline = time.perf_counter() + seconds
        start = time.perf_counter()

        async def worker() -> None:
            nonlocal done
            while time.perf_counter() < deadline:
                await request(session)
                done += 1

        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return done, time.perf_counter() - start


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f}"


def summary(values: list[float]) -> str:
    p50, p99 = ms(percentile(values, 50)), ms(percentile(values, 99))
    return f"p50 {p50} ms, p99 {p99} ms, mean {ms(statistics.fmean(values))}"


PYTHON = sys.executable


def wrk_throughput(
    url: str, body: bytes, headers: dict[str, str], *, seconds: float, connections: int, core: int | None
) -> tuple[int, float] | None:
    """(requests, seconds) from wrk POSTing ``body``; None when wrk is not installed."""
    if shutil.which("wrk") is None:
        return None
    import tempfile

    lines = ['wrk.method = "POST"', f"wrk.body = [[{body.decode()}]]"]
    lines += [f'wrk.headers["{name}"] = "{value}"' for name, value in headers.items()]
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as script:
        script.write("\n".join(lines) + "\n")
    args = pinned(["wrk", "-t1", f"-c{connections}", f"-d{int(seconds)}s", "-s", script.name, url], core)
    out = subprocess.run(args, capture_output=True, text=True, check=True).stdout
    os.unlink(script.name)
    for line in out.splitlines():
        if "requests in" in line:
            count, _, rest = line.strip().partition(" requests in ")
            duration = rest.split(",")[0]
            return int(count), _seconds(duration)
    raise RuntimeError(f"wrk printed no totals:\n{out}")


def _seconds(text: str) -> float:
    for unit, factor in (("ms", 0.001), ("us", 1e-6), ("m", 60.0), ("s", 1.0)):
        if text.endswith(unit):
            return float(text[: -len(unit)]) * factor
    return float(text)
