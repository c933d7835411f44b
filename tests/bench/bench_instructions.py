"""Instructions per request of one gateway worker and of the floor (the bare proxy), counted by valgrind's
callgrind: the same count whatever else the machine is doing, so a change to the request path can be
judged on a busy machine, where ``bench_proxy``'s CPU time per request drifts with the load.

Run: ``.venv/bin/python -m tests.bench.bench_instructions [--requests 300] [--target both|gateway|bare]``
(needs ``valgrind``; Debian's package). Each target starts under callgrind with instrumentation off (so it
starts at a few times its normal speed), is warmed up with uninstrumented requests, then instrumentation
is switched on (``callgrind_control -i on``) for ``--requests`` requests of each mode (non-stream, stream;
the ~1 KB chat of ``bench_proxy``, 4 at a time) and the counters are dumped after each mode. The figure is
the instructions executed in the process (Python, C extensions, the kernel's share not included) per
request, and, with ``--target both``, the gateway's ratio to the floor's.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import aiohttp

from tests.bench.bench_proxy import FEATURES, PATHS, body, check_feature, gateway_env, stores
from tests.bench.harness import PYTHON, post_json, process
from tests.factories import TENANT_KEY
from tests.ports import free_port

CONCURRENCY = 4


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--target", choices=("both", "gateway", "bare"), default="both")
    parser.add_argument("--api", choices=sorted(PATHS), default="chat")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--transport", default="aiohttp")
    parser.add_argument("--experiment", default="none")
    parser.add_argument("--feature", choices=sorted(FEATURES), default="default", help="as bench_proxy's")
    parser.add_argument("--managed-keys", choices=("off", "on"), default="off", help="as bench_proxy's")
    parser.add_argument(
        "--rate-limits",
        choices=("off", "on"),
        default="off",
        help="on: the tenant has rate limits (bench_proxy's)",
    )
    parser.add_argument("--ledger-linger", type=float, help="as bench_proxy's")
    parser.add_argument(
        "--profile", help="keep the callgrind dumps as PROFILE-{mode}.out (callgrind_annotate)"
    )
    args = parser.parse_args()
    check_feature(parser, args)
    if shutil.which("valgrind") is None:
        raise SystemExit("bench_instructions: valgrind is not installed (apt-get install valgrind)")
    counts: dict[str, dict[str, float]] = {}
    for target in ("bare", "gateway") if args.target == "both" else (args.target,):
        counts[target] = run_target(target, args)
    print(f"{'target':<10}{'mode':<12}{'instructions/request':>22}")
    for target, modes in counts.items():
        for mode, per_request in modes.items():
            print(f"{target:<10}{mode:<12}{per_request:>22,.0f}")
    if "bare" in counts and "gateway" in counts:
        for mode, floor in counts["bare"].items():
            print(f"gateway/floor {mode}: {counts['gateway'][mode] / floor:.2f}x")
    print(
        f"api: {args.api}; requests per mode: {args.requests}; experiment: {args.experiment}; "
        f"rate limits: {args.rate_limits}; feature: {args.feature}"
    )


def run_target(target: str, args: argparse.Namespace) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        mock_port, port = free_port(), free_port()
        mock_args = [PYTHON, "-m", "tests.bench.fast_upstream", "--port", str(mock_port)]
        with process(mock_args, f"http://127.0.0.1:{mock_port}/v1/models", env={}, log=tmp_path / "mock.log"):
            env = gateway_env(tmp_path, mock_port, port, args)
            command = [str(Path(PYTHON).parent / "gateway"), "serve"]
            if target == "bare":
                upstream = f"http://127.0.0.1:{mock_port}"
                command = [
                    PYTHON,
                    "-m",
                    "tests.bench.bare_proxy",
                    "--port",
                    str(port),
                    "--upstream",
                    upstream,
                ]
            out = tmp_path / "callgrind.out"
            valgrind = [
                "valgrind",
                "--tool=callgrind",
                "--instr-atstart=no",
                f"--callgrind-out-file={out}",
                *command,
            ]
            env["PYTHONMALLOC"] = "malloc"  # valgrind's allocator sees every block (as CPython advises)
            with process(
                valgrind,
                f"http://127.0.0.1:{port}/healthz",
                env=env,
                log=tmp_path / "target.log",
                timeout=600,
            ) as target_process:
                return asyncio.run(count(target, target_process.pid, f"http://127.0.0.1:{port}", out, args))


async def count(target: str, pid: int, base: str, out: Path, args: argparse.Namespace) -> dict[str, float]:
    headers = {"content-type": "application/json", "authorization": f"Bearer {TENANT_KEY}"}
    if args.api == "messages":
        headers = {
            "content-type": "application/json",
            "x-api-key": TENANT_KEY,
            "anthropic-version": "2023-06-01",
        }
    per_request: dict[str, float] = {}
    async with aiohttp.ClientSession() as session:
        for stream in (False, True):
            payload = body(stream, args.api, store=stores(args))
            send = post_json(f"{base}{PATHS[args.api]}", payload, headers)
            await batch(session, send, 40)  # warm: connections, caches, first-call imports
            control(pid, "-z")
            control(pid, "-i", "on")
            await batch(session, send, args.requests)
            control(pid, "-i", "off")
            dumped = control(pid, "-d")
            mode = "stream" if stream else "non-stream"
            per_request[mode] = instructions(out, pid, dumped) / args.requests
            if args.profile:
                newest = max(out.parent.glob(f"{out.name}*"), key=lambda path: path.stat().st_mtime)
                shutil.copy(newest, f"{args.profile}-{target}-{mode}.out")
    return per_request


async def batch(session: aiohttp.ClientSession, send: object, n: int) -> None:
    queue = list(range(n))

    async def worker() -> None:
        while queue:
            queue.pop()
            await send(session)  # type: ignore[operator]

    await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))


def control(pid: int, *flags: str) -> str:
    result = subprocess.run(
        ["callgrind_control", *flags, str(pid)], capture_output=True, text=True, check=True
    )
    return result.stdout


def instructions(out: Path, pid: int, dumped: str) -> float:
    """Instructions (``Ir``) in the newest dump of ``pid``."""
    time.sleep(0.2)
    dumps = sorted(out.parent.glob(f"{out.name}*"), key=lambda path: path.stat().st_mtime)
    text = dumps[-1].read_text(errors="replace")
    found = re.search(r"^totals:\s*(\d+)", text, re.MULTILINE)
    if found is None:
        raise RuntimeError(f"no totals in {dumps[-1]} ({dumped!r})")
    return float(found.group(1))


if __name__ == "__main__":
    main()
