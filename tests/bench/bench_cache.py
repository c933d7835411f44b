"""Response cache benchmark: what a hit costs beside a forwarded request, through one gateway worker in
front of the fast mock upstream.

Run: ``.venv/bin/python -m tests.bench.bench_cache [--seconds 10] [--api chat|messages]``. The gateway is
pinned to core 0; the fast mock upstream and this process (the load) share core 1. One config, two tenants:
``acme`` has a response cache, ``globex`` none. Modes, each measured the same way (latency p50/p99 at a fixed
20 req/s, then CPU per request and req/s at saturation with 32 connections):

- ``forwarded``: globex's request, the gateway's path with no cache (what every request costs today);
- ``miss+store``: acme's request with ``cache-control: no-cache``: forwarded, then its answer kept (the
  key's hash, the copy of the answer, the Redis write in the background);
- ``hit``: acme's request, answered from the cache (one Redis GET; no upstream call);
- ``hit stream``: the same request with ``stream: true``, the stored answer sent as SSE.

Latency here is the whole request as the client sees it, upstream included (the fast mock answers at
once, so a forwarded request's figure is nearly all gateway).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
from pathlib import Path

import orjson

from tests.bench.harness import (
    PYTHON,
    closed_loop,
    cpu_seconds,
    ms,
    open_loop,
    percentile,
    pinned,
    post_json,
    process,
)
from tests.factories import OTHER_KEY, TENANT_KEY, make_config, write_config
from tests.ports import free_port

PATHS = {"chat": "/v1/chat/completions", "messages": "/v1/messages"}


def body(api: str, *, stream: bool) -> bytes:
    text = "Summarise the following notes about the quarterly planning meeting. " * 14
    if api == "messages":
        message = {"role": "user", "content": [{"type": "text", "text": text}]}
        return orjson.dumps(
            {"model": "claude-sonnet-4-5", "max_tokens": 1024, "messages": [message], "stream": stream}
        )
    return orjson.dumps(
        {"model": "gpt-5.4", "messages": [{"role": "user", "content": text}], "stream": stream}
    )


def headers(api: str, key: str, **extra: str) -> dict[str, str]:
    if api == "messages":
        return {
            "content-type": "application/json",
            "x-api-key": key,
            "anthropic-version": "2023-06-01",
            **extra,
        }
    return {"content-type": "application/json", "authorization": f"Bearer {key}", **extra}


async def measure(gateway: str, pid: int, api: str, seconds: float) -> None:
    url = f"{gateway}{PATHS[api]}"
    modes = {
        "forwarded": post_json(url, body(api, stream=False), headers(api, OTHER_KEY)),
        "miss+store": post_json(
            url, body(api, stream=False), headers(api, TENANT_KEY, **{"cache-control": "no-cache"})
        ),
        "hit": post_json(url, body(api, stream=False), headers(api, TENANT_KEY)),
        "hit stream": post_json(url, body(api, stream=True), headers(api, TENANT_KEY)),
    }
    await closed_loop(modes["miss+store"], 1, 0.5)  # stores the answer the hits read
    await asyncio.sleep(0.5)
    rows = [("mode", "p50 @20/s", "p99 @20/s", "max req/s", "CPU ms/req")]
    for name, request in modes.items():
        await closed_loop(request, 8, 1.0)  # warm up
        [samples] = await open_loop([request], rate=20.0, seconds=seconds)
        totals = [sample.total for sample in samples]
        before = cpu_seconds(pid)
        done, elapsed = await closed_loop(request, 32, seconds)
        used = cpu_seconds(pid) - before
        rows.append(
            (name, ms(percentile(totals, 50)), ms(percentile(totals, 99)), f"{done / elapsed:.0f}",
             f"{used / done * 1000:.3f}")
        )  # fmt: skip
    for row in rows:
        print(f"{row[0]:<11} " + " ".join(f"{cell:>11}" for cell in row[1:]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--api", choices=list(PATHS), default="chat")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--transport", choices=["aiohttp", "httpx"], default="aiohttp")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        mock_port, gateway_port = free_port(), free_port()
        mock_args = pinned([PYTHON, "-m", "tests.bench.fast_upstream", "--port", str(mock_port)], 1)
        with process(mock_args, f"http://127.0.0.1:{mock_port}/v1/models", env={}, log=tmp_path / "mock.log"):
            config = make_config()
            config["providers"]["mock"]["base_url"] = f"http://127.0.0.1:{mock_port}/v1"
            config["providers"]["anthropic"] = {
                "base_url": f"http://127.0.0.1:{mock_port}/v1",
                "api_key": "sk-upstream",
                "kind": "anthropic",
            }
            config["models"]["claude-sonnet-4-5"] = {
                "provider": "anthropic",
                "context_window": 1_000_000,
                "pricing": {"input": "3.00", "cached_input": "0.30", "output": "15.00"},
            }
            config["tenants"] = {
                f"bench-{os.getpid()}": {"keys": [TENANT_KEY], "response_cache": {"ttl_seconds": 600}},
                "globex": {"keys": [OTHER_KEY]},
            }
            env = {
                "GATEWAY_CONFIG": str(write_config(tmp_path / "gateway.yaml", config)),
                "GATEWAY_PORT": str(gateway_port),
                "GATEWAY_REDIS_URL": args.redis_url,
                "GATEWAY_HTTP_TRANSPORT": args.transport,
                "GATEWAY_DATA_DIR": str(tmp_path / "data"),
            }
            gateway_args = pinned([str(Path(PYTHON).parent / "gateway"), "serve"], 0)
            with process(
                gateway_args,
                f"http://127.0.0.1:{gateway_port}/healthz",
                env=env,
                log=tmp_path / "gw.log",
                timeout=120,
            ) as gw:
                os.sched_setaffinity(0, {1})
                asyncio.run(measure(f"http://127.0.0.1:{gateway_port}", gw.pid, args.api, args.seconds))
                print(f"api: {args.api}; upstream transport: {args.transport}")


if __name__ == "__main__":
    main()
