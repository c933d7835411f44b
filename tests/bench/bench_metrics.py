"""Metrics benchmark: what the metrics observer adds to every request, and what a scrape costs.

Run: ``.venv/bin/python -m tests.bench.bench_metrics [--calls N]``. Each mode runs in a fresh process, as
prometheus_client chooses its value store when first imported: ``process`` (values in memory, as under a
test) and ``multiprocess`` (values in mmap'd files, as under ``gateway serve``). Rows: the observer per
request (a plain forward; a compressed request with a summary side call), the share of that spent pricing
the request (the ledger's ``main_event``), and rendering ``/metrics``. Target: the observer well under
the ~0.7 ms CPU budget of a whole request (PERFORMANCE.md), i.e. a few tens of microseconds.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

MODES = ("process", "multiprocess")


def timed(call: Callable[[], object], calls: int) -> tuple[float, float]:
    """(p50, mean) microseconds per call, over ``calls`` calls timed one by one."""
    samples = []
    for _ in range(calls):
        started = time.perf_counter_ns()
        call()
        samples.append(time.perf_counter_ns() - started)
    return statistics.median(samples) / 1000, statistics.fmean(samples) / 1000


def measure(calls: int, directory: Path) -> dict[str, tuple[float, float]]:
    import redis.asyncio as aioredis

    from gateway.base.record import RequestRecord, SideCall
    from gateway.base.types import Tenant, Usage
    from gateway.config.loading import load_config
    from gateway.config.settings import Settings
    from gateway.core.metering import LedgerRecorder
    from gateway.edge.logs import RequestLog, configure_logging
    from gateway.ledger import Ledger
    from gateway.metrics import GatewayMetrics, RequestMetrics, StateReading
    from tests.factories import make_config, shared_counter, write_config

    config_dict = make_config()
    config_dict["models"]["small"]["pricing"] = {"input": "0.20", "output": "1.00"}
    config = load_config(write_config(directory / "gateway.yaml", config_dict))
    metrics = GatewayMetrics(
        multiproc_dir=Settings().metrics_dir,
        spool_dir=directory / "spool",
        read_state=lambda: StateReading(0, 0, 0, False),
    )
    ledger = Ledger(aioredis.Redis(), spool_dir=directory / "spool")  # never started: not used by pricing
    observe = RequestMetrics(metrics.families, config=lambda: config)
    recorder = LedgerRecorder(
        ledger, config=lambda: config, counter=shared_counter, sinks=[observe.count_event]
    )

    def record(action: str) -> RequestRecord:
        made = RequestRecord(request_id="req_bench", endpoint="chat", tenant=Tenant("acme", "k"))
        made.requested_model = made.called_model = "gpt-5.4"
        made.action, made.status, made.prompt_tokens = action, 200, 12_000
        made.usage = Usage(input_tokens=1_200, cached_input_tokens=300, output_tokens=250)
        made.upstream_seconds, made.total_seconds = 0.420, 0.4215
        if action == "compress":
            made.side_calls.append(SideCall("summary", "small", "mock", Usage(input_tokens=10_000), 0.3, 200))
        return made

    forward, compress = record("forward"), record("compress")
    with open(os.devnull, "w") as devnull:  # the request log line, for comparison, written to nowhere
        stdout, sys.stdout = sys.stdout, devnull
        configure_logging("info", "json")
        request_log = RequestLog()
        sys.stdout = stdout
        logged = timed(lambda: request_log(forward), calls)
    priced = {id(made): recorder.events(made) for made in (forward, compress)}  # priced once, by the ledger

    def count(made: RequestRecord) -> None:
        observe(made)
        for event, kind in priced[id(made)]:
            observe.count_event(event, kind)

    for _ in range(1000):  # warm: label children created once, files mapped
        count(forward)
        count(compress)
    return {
        "observer, forward": timed(lambda: count(forward), calls),
        "observer, compress + summary": timed(lambda: count(compress), calls),
        "  of which pricing (main_event)": timed(lambda: recorder.main_event(forward, config, "acme"), calls),
        "for comparison: the request log line": logged,
        "render /metrics": timed(metrics.render, max(10, calls // 100)),
    }


def child(calls: int) -> None:
    with tempfile.TemporaryDirectory() as directory:
        print(json.dumps(measure(calls, Path(directory))))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--mode", choices=MODES, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.mode is not None:
        child(args.calls)
        return
    rows: dict[str, dict[str, tuple[float, float]]] = {}
    for mode in MODES:
        with tempfile.TemporaryDirectory() as metrics_dir:
            env = {key: value for key, value in os.environ.items() if key != "PROMETHEUS_MULTIPROC_DIR"}
            if mode == "multiprocess":
                env["PROMETHEUS_MULTIPROC_DIR"] = metrics_dir
            done = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "tests.bench.bench_metrics",
                    "--mode",
                    mode,
                    "--calls",
                    str(args.calls),
                ],
                env=env,
                capture_output=True,
                text=True,
                check=True,
            )
            rows[mode] = json.loads(done.stdout.strip().splitlines()[-1])
    print(f"{'what':34} {'mode':13} {'p50 µs':>9} {'mean µs':>9}")
    for mode, measured in rows.items():
        for what, (p50, mean) in measured.items():
            print(f"{what:34} {mode:13} {p50:9.1f} {mean:9.1f}")


if __name__ == "__main__":
    main()
