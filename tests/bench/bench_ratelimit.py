"""Rate-limit accuracy under a burst: N requests at once (2,000 by default) from one tenant against its
``requests_per_minute``, through a gateway of several workers (2 by default) in front of the fast mock
upstream, and how many were admitted.

A limit of L a minute is a bucket of L that refills at L a minute (``gateway.ratelimits``), so over a burst
that lasts S seconds it may admit L plus what refilled meanwhile, ``floor(L * S / 60)``, and no more; with
more requests than that it must admit no fewer than L. The figure printed is how far the admitted count is
from that range (0: exact), with the burst's length; a small L (the default, 10) makes the refill nil over a
burst of a few seconds, so the admitted count is the limit itself.

Run: ``.venv/bin/python -m tests.bench.bench_ratelimit [--concurrent 2000] [--limit 10] [--workers 2]``
(Redis at ``--redis-url``, default ``redis://127.0.0.1:6379/0``; each run uses a fresh tenant).
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path

import aiohttp
import orjson

from tests.bench.harness import PYTHON, process
from tests.factories import make_config, write_config
from tests.ports import free_port


async def burst(url: str, key: str, concurrent: int) -> tuple[Counter[int], float, dict[int, bytes]]:
    """Every request sent at once; the answers' statuses, the seconds from the first send to the last
    answer, and the body of one answer of each other status than 200 and 429."""
    odd: dict[int, bytes] = {}
    body = orjson.dumps({"model": "gpt-5.4", "messages": [{"role": "user", "content": "Hello"}]})
    headers = {"content-type": "application/json", "authorization": f"Bearer {key}"}
    connector = aiohttp.TCPConnector(limit=concurrent)
    timeout = aiohttp.ClientTimeout(total=300)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        start = asyncio.Event()

        async def one() -> int:
            await start.wait()
            async with session.post(f"{url}/v1/chat/completions", data=body, headers=headers) as answer:
                content = await answer.read()
                if answer.status not in (200, 429):
                    odd.setdefault(answer.status, content)
                return answer.status

        tasks = [asyncio.create_task(one()) for _ in range(concurrent)]
        await asyncio.sleep(0)  # every task waits at the start line
        started = time.monotonic()
        start.set()
        statuses = await asyncio.gather(*tasks, return_exceptions=True)
        elapsed = time.monotonic() - started
    return Counter(status if isinstance(status, int) else -1 for status in statuses), elapsed, odd


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--concurrent", type=int, default=2000)
    parser.add_argument("--limit", type=int, default=10, help="the tenant's requests_per_minute")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    args = parser.parse_args()
    tenant, key = f"bench-{uuid.uuid4().hex[:8]}", f"sk-bench-{uuid.uuid4().hex}"
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        mock_port, gateway_port = free_port(), free_port()
        mock_args = [PYTHON, "-m", "tests.bench.fast_upstream", "--port", str(mock_port)]
        with process(mock_args, f"http://127.0.0.1:{mock_port}/v1/models", env={}, log=tmp_path / "mock.log"):
            config = make_config(
                tenants={tenant: {"keys": [key], "rate_limits": {"requests_per_minute": args.limit}}}
            )
            config["providers"]["mock"]["base_url"] = f"http://127.0.0.1:{mock_port}/v1"
            env = {
                "GATEWAY_CONFIG": str(write_config(tmp_path / "gateway.yaml", config)),
                "GATEWAY_PORT": str(gateway_port),
                "GATEWAY_REDIS_URL": args.redis_url,
                "GATEWAY_WORKERS": str(args.workers),
            }
            gateway = [str(Path(PYTHON).parent / "gateway"), "serve"]
            url = f"http://127.0.0.1:{gateway_port}"
            with process(gateway, f"{url}/healthz", env=env, log=tmp_path / "gw.log", timeout=120):
                statuses, elapsed, odd = asyncio.run(burst(url, key, args.concurrent))
    admitted = statuses[200]
    refilled = int(args.limit * elapsed / 60)
    most = args.limit + refilled
    off = admitted - most if admitted > most else admitted - args.limit if admitted < args.limit else 0
    print(f"{args.concurrent} concurrent requests, {args.workers} workers, limit {args.limit} a minute")
    print(f"answers: {dict(sorted(statuses.items()))} (-1: no answer) in {elapsed:.2f} s")
    print(
        f"admitted {admitted}; a {args.limit}-a-minute bucket admits {args.limit} to {most} over that burst"
    )
    for status, content in odd.items():
        print(f"a {status}: {content[:300]!r}")
    print(f"off by {off} request(s) ({'exact' if off == 0 else 'NOT exact'})")


if __name__ == "__main__":
    main()
