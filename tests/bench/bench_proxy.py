"""Added latency, throughput, CPU per request and RSS of one gateway worker in front of the mock upstream.

Run: ``.venv/bin/python -m tests.bench.bench_proxy [--seconds 20]``. The gateway is pinned to core 0; the
fast mock upstream (tests/bench/fast_upstream.py) and the load generators share core 1: this process for
the open-loop latency run, wrk (when installed) for the saturation run. Requests are ~1 KB chat
completions (``--api responses``: the same text as a Responses ``input``; ``--api messages``: as an
Anthropic Messages request with ``x-api-key``). Direct and through-the-gateway requests are interleaved in
the same run, so "added" compares like with like. The floor is a bare proxy on the same HTTP stack
(``tests/bench/bare_proxy.py``); the machine drifts, so by default the floor is measured before and after the
gateway in the same run and the gateway's figures are given against it: added latency over the floor's,
throughput and CPU per request as ratios (``--target gateway`` or ``bare`` measures one alone). CPU per
request is measured twice: at saturation, and at 20 requests a second (the open-loop run), where what the
worker does between requests (timers, background writes) counts too. ``--rounds N`` measures the gateway N
times between runs of the floor and gives the medians: one round on a shared machine swings by more than
most changes.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import astuple, dataclass
from pathlib import Path

import orjson

from tests.bench.harness import (
    PYTHON,
    closed_loop,
    cpu_seconds,
    memory_mib,
    ms,
    open_loop,
    peak_rss_mib,
    percentile,
    pinned,
    post_json,
    process,
    wrk_throughput,
)
from tests.factories import TENANT_KEY, make_config, write_config
from tests.ports import free_port

PATHS = {"chat": "/v1/chat/completions", "responses": "/v1/responses", "messages": "/v1/messages"}


def body(stream: bool, api: str, *, store: bool = False) -> bytes:
    """The ~1 KB request of ``api``; ``store``: a Responses request the upstream keeps (and the gateway
    remembers, for a next turn)."""
    text = "Summarise the following notes about the quarterly planning meeting. " * 14
    if api == "responses":
        item = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}
        return orjson.dumps({"model": "gpt-5.4", "input": [item], "stream": stream, "store": store})
    if api == "messages":
        message = {"role": "user", "content": [{"type": "text", "text": text}]}
        return orjson.dumps(
            {"model": "claude-sonnet-4-5", "max_tokens": 1024, "messages": [message], "stream": stream}
        )
    return orjson.dumps(
        {"model": "gpt-5.4", "messages": [{"role": "user", "content": text}], "stream": stream}
    )


@dataclass(frozen=True, slots=True)
class Figures:
    """One mode's figures for one target (seconds, requests per second, CPU seconds per request)."""

    added_p50: float
    added_ttfb: float
    max_rps: float
    cpu_per_request: float
    cpu_at_rate: float
    """CPU seconds per request at 20 requests a second, what the process does between them included."""


async def measure(
    mock: str, gateway: str, gateway_pid: int, seconds: float, profile: str | None, api: str, store: bool
) -> tuple[dict[str, Figures], float]:
    """Each mode's figures, printed as a table, and the target's peak RSS in MiB."""
    headers = {"content-type": "application/json", "authorization": f"Bearer {TENANT_KEY}"}
    if api == "messages":
        headers = {
            "content-type": "application/json",
            "x-api-key": TENANT_KEY,
            "anthropic-version": "2023-06-01",
        }
    path = PATHS[api]
    rows = []
    figures: dict[str, Figures] = {}
    for stream in (False, True):
        mode = "stream" if stream else "plain"
        payload = body(stream, api, store=store)
        direct = post_json(f"{mock}{path}", payload, headers)
        through = post_json(f"{gateway}{path}", payload, headers)
        await closed_loop(through, 8, 2.0)  # warm up connections and caches
        # at 20 req/s the worker is idle most of the time: sampled often, without stopping it
        spy = None
        if profile:
            spy = py_spy(gateway_pid, f"{profile}-{mode}-20rps.txt", seconds, 1000, "--nonblocking")
        cpu_before = cpu_seconds(gateway_pid)
        direct_samples, gateway_samples = await open_loop([direct, through], rate=40.0, seconds=seconds)
        cpu_at_rate = (cpu_seconds(gateway_pid) - cpu_before) / len(gateway_samples)
        if spy is not None:
            spy.wait()
        added_p50 = percentile([s.total for s in gateway_samples], 50) - percentile(
            [s.total for s in direct_samples], 50
        )
        added_p99 = percentile([s.total for s in gateway_samples], 99) - percentile(
            [s.total for s in direct_samples], 99
        )
        added_ttfb = percentile([s.first_byte for s in gateway_samples], 50) - percentile(
            [s.first_byte for s in direct_samples], 50
        )
        spy = py_spy(gateway_pid, f"{profile}-{mode}.txt", seconds, 400) if profile else None
        cpu_before = cpu_seconds(gateway_pid)
        measured = wrk_throughput(
            f"{gateway}{path}", payload, headers, seconds=seconds, connections=64, core=1
        )
        done, elapsed = measured if measured is not None else await closed_loop(through, 64, seconds)
        if spy is not None:
            spy.wait()
        cpu_used = cpu_seconds(gateway_pid) - cpu_before
        figures["stream" if stream else "non-stream"] = Figures(
            added_p50, added_ttfb, done / elapsed, cpu_used / done, cpu_at_rate
        )
        rows.append(
            (
                "stream" if stream else "non-stream",
                len(gateway_samples),
                ms(added_p50),
                ms(added_p99),
                ms(added_ttfb),
                f"{done / elapsed:.0f}",
                f"{cpu_used / done * 1000:.3f}",
                f"{cpu_at_rate * 1000:.3f}",
            )
        )
    header = (
        "mode",
        "n@20/s",
        "added p50",
        "added p99",
        "added TTFB",
        "max req/s",
        "CPU ms/req",
        "CPU @20/s",
    )
    for row in (header, *rows):
        print(f"{row[0]:<11} " + " ".join(f"{cell:>11}" for cell in row[1:]))
    peak, now = peak_rss_mib(gateway_pid), memory_mib(gateway_pid)
    print(
        f"gateway RSS: peak {peak:.1f} MiB (vocabulary loading included), after the runs {now.rss:.1f} MiB "
        f"(PSS {now.pss:.1f}, USS {now.uss:.1f})"
    )
    return figures, peak


def py_spy(pid: int, out: str, seconds: float, rate: int, *options: str) -> subprocess.Popen[bytes]:
    """py-spy recording ``pid``'s raw stacks to ``out`` for ``seconds``, ``rate`` samples a second."""
    spy_args = ["record", *options, "-r", str(rate), "-f", "raw", "-o", out, "-d", str(int(seconds))]
    return subprocess.Popen(
        ["py-spy", *spy_args, "-p", str(pid)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )


def against_floor(gateway: dict[str, Figures], floors: list[dict[str, Figures]]) -> dict[str, Ratios]:
    """The gateway's figures as the issue's targets read them, against the floor averaged over its runs."""
    ratios: dict[str, Ratios] = {}
    for mode, figures in gateway.items():
        runs = [floor[mode] for floor in floors]

        def mean(value: Callable[[Figures], float], runs: list[Figures] = runs) -> float:
            return sum(value(run) for run in runs) / len(runs)

        ratios[mode] = Ratios(
            figures.added_p50 - mean(lambda run: run.added_p50),
            figures.added_ttfb - mean(lambda run: run.added_ttfb),
            figures.max_rps / mean(lambda run: run.max_rps),
            figures.cpu_per_request / mean(lambda run: run.cpu_per_request),
            figures.cpu_at_rate / mean(lambda run: run.cpu_at_rate),
        )
    return ratios


@dataclass(frozen=True, slots=True)
class Ratios:
    """One mode of the gateway against the floor: added latency over the floor's (seconds), throughput
    and CPU per request (at saturation, and at 20 requests a second) as ratios to the floor's."""

    over_p50: float
    over_ttfb: float
    rps: float
    cpu: float
    cpu_at_rate: float


def ratio_table(rounds: list[dict[str, Ratios]]) -> str:
    """Each round's ratios, and with several rounds their medians (what one round's noise moves least)."""
    lines = [
        "round  mode        over floor p50  over floor TTFB  req/s vs floor  CPU/req vs floor"
        "  CPU @20/s vs floor"
    ]
    shown = [(str(number + 1), ratios) for number, ratios in enumerate(rounds)]
    if len(rounds) > 1:
        shown.append(("median", {mode: _median([r[mode] for r in rounds]) for mode in rounds[0]}))
    for name, ratios in shown:
        for mode, ratio in ratios.items():
            lines.append(
                f"{name:<6} {mode:<11} {ms(ratio.over_p50):>14} {ms(ratio.over_ttfb):>16} "
                f"{ratio.rps:>15.0%} {ratio.cpu:>17.2f}x {ratio.cpu_at_rate:>18.2f}x"
            )
    return "\n".join(lines)


def _median(ratios: list[Ratios]) -> Ratios:
    return Ratios(*(statistics.median(values) for values in zip(*(astuple(r) for r in ratios), strict=True)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="with --target both: the gateway measured this many times, each between two runs of the floor "
        "(floor, gateway, floor, gateway, …, floor), each against its two neighbours, and the medians",
    )
    parser.add_argument("--transport", choices=["aiohttp", "httpx"], default="aiohttp")
    parser.add_argument(
        "--profile",
        help="record py-spy raw stacks of the target to PROFILE-{plain,stream}.txt at saturation (400 "
        "samples a second) and PROFILE-{plain,stream}-20rps.txt at 20 requests a second (1,000 a second, "
        "without stopping the process); a profiled run's figures are not comparable with others",
    )
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--api", choices=list(PATHS), default="chat")
    parser.add_argument(
        "--target",
        choices=["both", "gateway", "bare"],
        default="both",
        help="both (the default): the floor, the gateway, the floor again, and the gateway's figures against "
        "the floor's; bare: the floor alone, a bare proxy on the same HTTP stack (tests/bench/bare_proxy.py)",
    )
    parser.add_argument(
        "--experiment",
        choices=["none", "nomatch", "shadow10"],
        default="none",
        help="nomatch: a shadow experiment on another model; shadow10: one shadowing 10%% of the requests",
    )
    parser.add_argument(
        "--rate-limits",
        choices=["off", "on"],
        default="off",
        help="on: the tenant has requests and tokens per minute limits it never reaches (each request "
        "admitted and settled in Redis)",
    )
    parser.add_argument(
        "--managed-keys",
        choices=["off", "on"],
        default="off",
        help="on: keys managed by API are turned on (each process follows them from Redis)",
    )
    parser.add_argument(
        "--feature",
        choices=sorted(FEATURES),
        default="default",
        help="the config's features against the default (sampling 5%%, conversations tracked from 16,384 "
        "tokens, no passthrough routes): " + "; ".join(f"{name}: {what}" for name, what in FEATURES.items()),
    )
    parser.add_argument(
        "--ledger-linger",
        type=float,
        help="the ledger writer's linger_seconds (unset: the config's default), to see what its round trips "
        "cost at 20 requests a second",
    )
    args = parser.parse_args()
    check_feature(parser, args)
    if args.target != "both":
        run_target(args.target, args)
        return
    floor, floor_rss = run_target("bare", args)
    rounds, rss = [], []
    for _ in range(args.rounds):
        gateway, gateway_rss = run_target("gateway", args)
        next_floor, floor_rss = run_target("bare", args)
        rounds.append(against_floor(gateway, [floor, next_floor]))
        rss.append(gateway_rss)
        floor = next_floor
    print()
    print(ratio_table(rounds))
    print(f"peak RSS: gateway {max(rss):.1f} MiB, floor {floor_rss:.1f} MiB")


def run_target(target: str, args: argparse.Namespace) -> tuple[dict[str, Figures], float]:
    """Start the fast mock upstream and ``target`` in front of it, and measure it."""
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        mock_port, gateway_port = free_port(), free_port()
        mock_args = pinned([PYTHON, "-m", "tests.bench.fast_upstream", "--port", str(mock_port)], 1)
        with process(mock_args, f"http://127.0.0.1:{mock_port}/v1/models", env={}, log=tmp_path / "mock.log"):
            env = gateway_env(tmp_path, mock_port, gateway_port, args)
            gateway_args = pinned([str(Path(PYTHON).parent / "gateway"), "serve"], 0)
            if target == "bare":
                upstream = f"http://127.0.0.1:{mock_port}"
                bare = ["-m", "tests.bench.bare_proxy", "--port", str(gateway_port), "--upstream", upstream]
                gateway_args = pinned([PYTHON, *bare], 0)
            with process(
                gateway_args,
                f"http://127.0.0.1:{gateway_port}/healthz",
                env=env,
                log=tmp_path / "gw.log",
                timeout=120,
            ) as gw:
                os.sched_setaffinity(0, {1})
                # the gateway process is taskset's child exec: same pid
                measured = asyncio.run(
                    measure(
                        f"http://127.0.0.1:{mock_port}",
                        f"http://127.0.0.1:{gateway_port}",
                        gw.pid,
                        args.seconds,
                        args.profile,
                        args.api,
                        stores(args),
                    )
                )
                print(
                    f"target: {target}; upstream transport: {args.transport}; api: {args.api}; "
                    f"experiment: {args.experiment}; rate limits: {args.rate_limits}; "
                    f"managed keys: {args.managed_keys}; feature: {args.feature}; "
                    f"ledger linger: {'default' if args.ledger_linger is None else args.ledger_linger}"
                )
                return measured


FEATURES = {
    "default": "the config as it is",
    "no-sampling": "passive sampling turned off",
    "no-conversations": "no request large enough to leave its conversation's state",
    "passthrough": "twelve passthrough routes the requests do not take",
    "responses-stored": "Responses requests with store: true, which the gateway remembers for a next turn "
    "(the default's are store: false; with --api responses)",
}


def check_feature(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Refuse a feature the run's API cannot have."""
    if stores(args) and args.api != "responses":
        parser.error("--feature responses-stored needs --api responses")


def stores(args: argparse.Namespace) -> bool:
    """Whether the run's requests ask the upstream to store their responses (``body``'s ``store``)."""
    return bool(args.feature == "responses-stored")


PASSTHROUGH_PATHS = (
    "moderations", "audio/speech", "audio/transcriptions", "audio/translations", "images/generations",
    "images/edits", "images/variations", "completions", "rerank", "classifications", "tokenize", "detokenize",
)  # fmt: skip


def gateway_env(
    tmp_path: Path, mock_port: int, gateway_port: int, args: argparse.Namespace
) -> dict[str, str]:
    """The gateway's environment: a config whose providers are the fast mock (and the experiment asked)."""
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
    if args.managed_keys == "on":  # requests still use the config's key: what turning it on costs them
        config["keys"] = {"managed": True}
    if args.rate_limits == "on":
        config["tenants"]["acme"]["rate_limits"] = {
            "requests_per_minute": 1_000_000_000,
            "tokens_per_minute": 1_000_000_000_000,
        }
    if args.feature == "no-sampling":
        config["sampling"] = {"enabled": False}
    elif args.feature == "no-conversations":
        config.setdefault("limits", {})["track_conversations_from"] = 1_000_000_000
    elif args.feature == "passthrough":
        config["passthrough"] = [
            {"path": f"/{name}", "methods": ["POST"], "provider": "mock"} for name in PASSTHROUGH_PATHS
        ]
    if args.ledger_linger is not None:
        config.setdefault("ledger", {})["linger_seconds"] = args.ledger_linger
    if args.experiment != "none":
        config["models"]["gpt-5.2"]["pricing"] = {"input": "1.00", "output": "4.00"}
        config["experiments"] = {
            "bench": {
                "mode": "shadow",
                "primary": ["small" if args.experiment == "nomatch" else "gpt-5.4"],
                "candidate": "gpt-5.2",
                "sample_rate": 0.1,
                "budget_usd_per_day": 1_000_000,
                "max_concurrency": 64,
            }
        }
    return {
        "GATEWAY_CONFIG": str(write_config(tmp_path / "gateway.yaml", config)),
        "GATEWAY_PORT": str(gateway_port),
        "GATEWAY_REDIS_URL": args.redis_url,
        "GATEWAY_HTTP_TRANSPORT": args.transport,
    }


if __name__ == "__main__":
    main()
