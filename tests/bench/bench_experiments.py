"""What an experiment costs the requests it is not about, and the ones it shadows, like for like.

Run: ``.venv/bin/python -m tests.bench.bench_experiments [--seconds 30]``. Three gateway processes share
core 0 and the fast mock upstream (tests/bench/fast_upstream.py) core 1: one without experiments, one with
a shadow experiment on another model (``nomatch``: the requests sent are never its traffic) and one
shadowing 10% of the requests sent (``shadow10``; its candidate is answered by the same mock). One open
loop, on core 1, interleaves direct calls and calls through each gateway at 20 req/s apiece, so the
machine's drift from second to second falls on all of them alike. Printed per gateway: the client's
added latency p50/p90/p99 (against the direct calls), the difference of its p50 from the plain gateway's,
CPU per client request (the shadow calls' work included), and the shadow calls made and shed.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx

from tests.bench.bench_proxy import PATHS, body
from tests.bench.harness import PYTHON, cpu_seconds, ms, open_loop, percentile, pinned, post_json, process
from tests.factories import ADMIN_KEY, TENANT_KEY, make_config, write_config
from tests.ports import free_port

VARIANTS = ("plain", "nomatch", "shadow10")


def config_for(variant: str, mock_port: int) -> dict[str, Any]:
    config = make_config()
    config["providers"]["mock"]["base_url"] = f"http://127.0.0.1:{mock_port}/v1"
    config["models"]["gpt-5.2"]["pricing"] = {"input": "1.00", "output": "4.00"}
    if variant != "plain":
        config["experiments"] = {
            "bench": {
                "mode": "shadow",
                "primary": ["small" if variant == "nomatch" else "gpt-5.4"],
                "candidate": "gpt-5.2",
                "sample_rate": 0.1,
                "budget_usd_per_day": 1_000_000,
                "max_concurrency": 64,
            }
        }
    return config


async def measure(mock: str, gateways: dict[str, tuple[str, int]], seconds: float, stream: bool) -> None:
    headers = {"content-type": "application/json", "authorization": f"Bearer {TENANT_KEY}"}
    payload = body(stream, "chat")
    path = PATHS["chat"]
    targets = [post_json(f"{mock}{path}", payload, headers)]
    targets += [post_json(f"{url}{path}", payload, headers) for url, _ in gateways.values()]
    await open_loop(targets, rate=40.0, seconds=2.0)  # warm up connections and caches
    before = {name: cpu_seconds(pid) for name, (_, pid) in gateways.items()}
    direct, *through = await open_loop(targets, rate=20.0 * len(targets), seconds=seconds)
    await asyncio.sleep(3.0)  # the last shadow calls end, their counters are flushed
    used = {name: cpu_seconds(pid) - before[name] for name, (_, pid) in gateways.items()}
    base = {q: percentile([s.total for s in direct], q) for q in (50, 90, 99)}
    plain_p50 = percentile([s.total for s in through[0]], 50) - base[50]
    print(f"\n{'stream' if stream else 'non-stream'}: {len(direct)} direct calls, p50 {ms(base[50])} ms")
    columns = ("n", "added p50", "added p90", "added p99", "vs plain", "CPU ms/req")
    print(f"{'gateway':<10} " + " ".join(f"{column:>10}" for column in columns))
    for (name, _), samples in zip(gateways.items(), through, strict=True):
        added = {q: percentile([s.total for s in samples], q) - base[q] for q in (50, 90, 99)}
        cells = (len(samples), ms(added[50]), ms(added[90]), ms(added[99]), ms(added[50] - plain_p50))
        cpu = f"{used[name] / len(samples) * 1000:.3f}"
        print(f"{name:<10} " + " ".join(f"{cell:>10}" for cell in (*cells, cpu)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        tmp_path = Path(tmp)
        mock_port = free_port()
        mock_args = pinned([PYTHON, "-m", "tests.bench.fast_upstream", "--port", str(mock_port)], 1)
        stack.enter_context(
            process(mock_args, f"http://127.0.0.1:{mock_port}/v1/models", env={}, log=tmp_path / "mock.log")
        )
        gateways: dict[str, tuple[str, int]] = {}
        for variant in VARIANTS:
            port = free_port()
            path = write_config(tmp_path / f"{variant}.yaml", config_for(variant, mock_port))
            env = {
                "GATEWAY_CONFIG": str(path),
                "GATEWAY_PORT": str(port),
                "GATEWAY_REDIS_URL": args.redis_url,
                "GATEWAY_ADMIN_KEY": ADMIN_KEY,
                "GATEWAY_DATA_DIR": str(tmp_path / variant),
            }
            gateway_args = pinned([str(Path(PYTHON).parent / "gateway"), "serve"], 0)
            url = f"http://127.0.0.1:{port}"
            proc = stack.enter_context(
                process(gateway_args, f"{url}/healthz", env=env, log=tmp_path / f"{variant}.log")
            )
            gateways[variant] = (url, proc.pid)
        os.sched_setaffinity(0, {1})
        for stream in (False, True):
            asyncio.run(measure(f"http://127.0.0.1:{mock_port}", gateways, args.seconds, stream))
        listed = httpx.get(
            f"{gateways['shadow10'][0]}/admin/experiments", headers={"authorization": f"Bearer {ADMIN_KEY}"}
        )
        print(f"\nshadow10's experiment: {listed.text[:600]}")


if __name__ == "__main__":
    main()
