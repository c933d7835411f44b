"""Memory of `gateway serve` with 1, 2 and 4 workers after some traffic: RSS, PSS and USS of the serving
process and of each worker, and the whole gateway's (the sum of their PSS).

Run: ``.venv/bin/python -m tests.bench.bench_memory [--workers 1 2 4] [--seconds 6]``. Each gateway serves
~1 KB chat completions (plain, then streamed: ``--seconds`` each, 16 connections) from the fast mock
upstream (tests/bench/fast_upstream.py), with the Redis of ``--redis-url``. RSS counts every page a process
maps, shared or not; PSS divides each page among the processes that map it, so the PSS of all the
gateway's processes adds up to what the gateway uses; USS is what only that process maps (what stopping it
would free). With one worker the serving process is the worker; with more, it is their supervisor (and,
when it spawns them, multiprocessing's resource tracker is another child).
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

import orjson

from tests.bench.harness import PYTHON, closed_loop, memory_mib, peak_rss_mib, post_json, process
from tests.e2e.processes import children
from tests.factories import TENANT_KEY, make_config, write_config
from tests.ports import free_port


async def traffic(url: str, seconds: float) -> None:
    text = "Summarise the following notes about the quarterly planning meeting. " * 14
    headers = {"content-type": "application/json", "authorization": f"Bearer {TENANT_KEY}"}
    for stream in (False, True):
        body = {"model": "gpt-5.4", "messages": [{"role": "user", "content": text}], "stream": stream}
        await closed_loop(post_json(f"{url}/v1/chat/completions", orjson.dumps(body), headers), 16, seconds)


def report(pid: int, workers: int) -> float:
    """Prints a line per process of the gateway; returns the sum of their PSS in MiB."""
    roles = [(pid, "serving process" if workers > 1 else "serving process = the worker")]
    for child in children(pid):
        command = Path(f"/proc/{child}/cmdline").read_bytes()
        roles.append((child, "resource tracker" if b"resource_tracker" in command else "worker"))
    total = 0.0
    print(f"{'':<29} {'pid':>7} {'RSS':>7} {'PSS':>7} {'USS':>7} {'peak RSS':>9}")
    for member, role in roles:
        memory = memory_mib(member)
        total += memory.pss
        print(
            f"{role:<29} {member:>7} {memory.rss:>7.1f} {memory.pss:>7.1f} {memory.uss:>7.1f} "
            f"{peak_rss_mib(member):>9.1f}"
        )
    print(f"{'the gateway (sum of PSS)':<29} {'':>7} {'':>7} {total:>7.1f}")
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        mock_port = free_port()
        mock = [PYTHON, "-m", "tests.bench.fast_upstream", "--port", str(mock_port)]
        with process(mock, f"http://127.0.0.1:{mock_port}/v1/models", env={}, log=tmp_path / "mock.log"):
            config = make_config()
            config["providers"]["mock"]["base_url"] = f"http://127.0.0.1:{mock_port}/v1"
            path = write_config(tmp_path / "gateway.yaml", config)
            for workers in args.workers:
                port = free_port()
                env = {
                    "GATEWAY_CONFIG": str(path),
                    "GATEWAY_PORT": str(port),
                    "GATEWAY_DATA_DIR": str(tmp_path / f"data-{workers}"),
                    "GATEWAY_REDIS_URL": args.redis_url,
                    "GATEWAY_WORKERS": str(workers),
                }
                gateway = [str(Path(PYTHON).parent / "gateway"), "serve"]
                url = f"http://127.0.0.1:{port}"
                log = tmp_path / f"gateway-{workers}.log"
                with process(gateway, f"{url}/healthz", env=env, log=log, timeout=120) as serving:
                    asyncio.run(traffic(url, args.seconds))
                    time.sleep(1.0)  # the last responses' work done
                    print(f"workers: {workers}")
                    report(serving.pid, workers)
                    print()


if __name__ == "__main__":
    main()
