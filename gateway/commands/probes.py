"""``gateway probes report`` (the behaviour map of a model) and ``gateway probe run`` (needle probes).

``gateway probe run`` exits 1 when the upstream is not answering the probe: no probe was answered, or none
at the shortest length probed was, or none there recalled the needle (0% recall at the shortest length is
not "recall held", it is a probe the model never answered).

Both read or write the gateway's Redis: ``--redis-url``, else ``GATEWAY_REDIS_URL``, else the unix socket
of the embedded server in the data directory (``<GATEWAY_DATA_DIR>/redis/redis.sock``). Buckets and
boundary settings come from the ``sampling:`` section of ``--config`` (default ``GATEWAY_CONFIG``) when
that file loads, else from the defaults.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import orjson

from gateway.commands.store import (
    CommandError,
    gateway_config,
    open_store,
    redis_url,
    run_command,
    since_of,
    store_options,
)
from gateway.config.schema.sampling import SamplingConfig
from gateway.config.settings import Settings
from gateway.sampling.keys import SamplingKeys
from gateway.sampling.probes.haystack import ApproximateTokens, EncodingTokens, Tokenizer
from gateway.sampling.probes.needle import ProbeResult
from gateway.sampling.probes.probe import ProbePlan, ProbeRunner, Progress, store_results
from gateway.sampling.probes.recall import recall_grid
from gateway.sampling.report.boundary import length_boundary
from gateway.sampling.report.document import probe_boundary_document, recall_document, report_document
from gateway.sampling.report.html import render_html
from gateway.sampling.report.reader import SampleReader
from gateway.sampling.report.routes import read_report
from gateway.sampling.report.table import render_recall, render_report
from gateway.sampling.report.verdict import RecallVerdict, recall_verdict
from gateway.tokens.buckets import parse_tokens, tokens_label


def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    probes = subparsers.add_parser("probes", help="the behaviour map of a model", description=__doc__)
    actions = probes.add_subparsers(dest="probes_action", required=True, metavar="ACTION")
    report = actions.add_parser("report", help="distributions by context length, boundary, probe recall")
    report.add_argument("--model", help="the called model (default: list the models with samples)")
    report.add_argument("--since", default="7d", help="duration back (30m, 24h, 7d) or ISO date; default 7d")
    output = report.add_mutually_exclusive_group()
    output.add_argument("--html", type=Path, metavar="FILE", help="write a self-contained HTML report here")
    output.add_argument("--json", action="store_true", help="print the report as JSON")
    store_options(report)
    report.set_defaults(handler=run_report)

    probe = subparsers.add_parser("probe", help="active needle-in-a-haystack probes", description=__doc__)
    probe_actions = probe.add_subparsers(dest="probe_action", required=True, metavar="ACTION")
    run = probe_actions.add_parser("run", help="send needle probes through the gateway and score recall")
    run.add_argument("--model", required=True)
    run.add_argument("--lengths", default="8k,32k,128k", help="haystack tokens (default 8k,32k,128k)")
    run.add_argument("--depths", default="0.1,0.5,0.9", help="needle depths, 0 to 1 (default 0.1,0.5,0.9)")
    run.add_argument("--repeats", type=int, default=1, help="probes per length and depth (default 1)")
    run.add_argument("--base-url", help="the gateway (default http://GATEWAY_HOST:GATEWAY_PORT)")
    run.add_argument("--key", required=True, help="a tenant API key for the gateway; '-' reads it from stdin")
    run.add_argument("--concurrency", type=int, default=1, help="probes in flight at once (default 1)")
    run.add_argument("--max-tokens", type=int, help="max_completion_tokens of each probe (default: unset)")
    run.add_argument("--timeout", type=float, default=600.0, help="seconds per probe (default 600)")
    run.add_argument("--approximate-tokens", action="store_true", help="count 4 characters per token")
    run.add_argument("--no-store", action="store_true", help="do not store the results in Redis")
    run.add_argument("--json", action="store_true", help="print the results as JSON")
    store_options(run)
    run.set_defaults(handler=run_probes)


def run_report(args: argparse.Namespace) -> int:
    return run_command(_report(args, Settings()), command="probes", redis_problem="cannot reach Redis")


def run_probes(args: argparse.Namespace) -> int:
    return run_command(_probe(args, Settings()), command="probe", redis_problem="cannot reach Redis")


def sampling_config(path: Path | None, settings: Settings) -> SamplingConfig:
    config = gateway_config(path, settings, defaults="sampling settings")
    return config.sampling if config is not None else SamplingConfig()


# --- gateway probes report ---------------------------------------------------------------------------


async def _report(args: argparse.Namespace, settings: Settings) -> int:
    config = sampling_config(args.config, settings)
    now = time.time()
    since = since_of(args.since, now=now)
    client = await open_store(redis_url(args.redis_url, settings), settings)
    try:
        reader = SampleReader(client, keys=SamplingKeys(config.key_prefix))
        if args.model is None:
            models = await reader.models()
            print("\n".join(models) if models else "no samples yet")
            return 0
        report = await read_report(reader, model=args.model, since=since, until=now, config=config)
    finally:
        await client.aclose()
    if args.html is not None:
        args.html.write_text(render_html(report), encoding="utf-8")
        print(f"wrote {args.html} ({report.samples:,} samples, {(report.recall.lengths and 'with') or 'no'} "
              "probe results)")  # fmt: skip
    elif args.json:
        sys.stdout.write(orjson.dumps(report_document(report), option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        sys.stdout.write(render_report(report))
    return 0


# --- gateway probe run -------------------------------------------------------------------------------


def _plan(args: argparse.Namespace) -> ProbePlan:
    try:
        lengths = tuple(sorted({parse_tokens(item) for item in args.lengths.split(",") if item.strip()}))
        depths = tuple(sorted({float(item) for item in args.depths.split(",") if item.strip()}))
    except ValueError as exc:
        raise CommandError(f"invalid --lengths or --depths: {exc}") from exc
    if not lengths or any(length < 100 for length in lengths):
        raise CommandError("--lengths must be token counts of at least 100 (e.g. 8k,32k,128k)")
    if not depths or any(not 0 <= depth <= 1 for depth in depths):
        raise CommandError("--depths must be numbers between 0 and 1 (e.g. 0.1,0.5,0.9)")
    if args.repeats < 1:
        raise CommandError("--repeats must be at least 1")
    return ProbePlan(
        model=args.model, lengths=lengths, depths=depths, repeats=args.repeats, max_tokens=args.max_tokens
    )


def tokenizer_for(model: str, *, approximate: bool) -> Tokenizer:
    """The model's tiktoken encoding from ``gateway.tokens``; 4 characters per token when it cannot load."""
    if approximate:
        return ApproximateTokens()
    from gateway.tokens.encodings import choose_encoding
    from gateway.tokens.vocab import VocabularyError, load_vocabulary

    choice = choose_encoding((model,), configured=None, default="o200k_base")
    try:
        return EncodingTokens(load_vocabulary(choice.name).encoding)
    except VocabularyError as exc:
        print(f"note: no vocabulary ({exc}); counting about 4 characters per token", file=sys.stderr)
        return ApproximateTokens()


async def _probe(args: argparse.Namespace, settings: Settings) -> int:
    plan = _plan(args)
    key = sys.stdin.readline().strip() if args.key == "-" else args.key
    if not key:
        raise CommandError("--key is empty")
    store_url = None if args.no_store else redis_url(args.redis_url, settings)
    config = sampling_config(args.config, settings)
    base_url = (args.base_url or f"http://{settings.host}:{settings.port}").rstrip("/").removesuffix("/v1")
    tokenizer = tokenizer_for(plan.model, approximate=args.approximate_tokens)
    timeout = httpx.Timeout(args.timeout, connect=10.0)
    headers = {"authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(base_url=base_url, headers=headers, timeout=timeout) as client:
        runner = ProbeRunner(client, tokenizer=tokenizer)
        total = len(plan.cases())
        print(f"run {runner.run_id}: {total} probes of {plan.model} through {base_url}", file=sys.stderr)
        results = await runner.run(plan, concurrency=args.concurrency, progress=_progress())
    if store_url is not None:
        client_redis = await open_store(store_url, settings)
        try:
            await store_results(
                client_redis, results, keys=SamplingKeys(config.key_prefix), maxlen=config.probe_maxlen
            )
        finally:
            await client_redis.aclose()
    verdict = _print_results(results, args, config, exact=getattr(tokenizer, "exact", False))
    return 0 if verdict.answering else 1


def _progress() -> Progress:
    tty = sys.stderr.isatty()

    def show(done: int, total: int, result: ProbeResult) -> None:
        outcome = "recalled" if result.recalled else (result.error or "missed")
        line = (
            f"[{done}/{total}] {tokens_label(result.length)} depth {result.depth:g} "
            f"#{result.repeat + 1}: {outcome} ({result.latency or 0:.1f} s)"
        )
        if tty:
            print(f"\r\033[K{line}", end="" if done < total else "\n", file=sys.stderr, flush=True)
        else:
            print(line, file=sys.stderr, flush=True)

    return show


def _print_results(
    results: list[ProbeResult], args: argparse.Namespace, config: SamplingConfig, *, exact: bool
) -> RecallVerdict:
    """Print the recall grid and the boundary, or why there is none; the verdict decides the exit status."""
    grid = recall_grid(results)
    boundary = length_boundary(grid, config.boundary)
    failed = [result for result in results if not result.answered]
    shortest = min((result.length for result in results), default=None)
    verdict = recall_verdict(grid, config.boundary, shortest=shortest)
    summary = boundary.describe() if boundary is not None and verdict.answering else verdict.describe()
    if args.json:
        body = {
            "model": args.model,
            "recall": recall_document(grid),
            "failed": len(failed),
            "boundary": probe_boundary_document(boundary),
            "answering": verdict.answering,
            "verdict": summary,
            "tokens": "exact" if exact else "approximate",
        }  # fmt: skip
        sys.stdout.write(orjson.dumps(body, option=orjson.OPT_INDENT_2).decode() + "\n")
        return verdict
    print(f"needle recall of {args.model} by length x depth ({'exact' if exact else 'approximate'} tokens)")
    if grid.empty:
        print("no probe was answered")
    else:
        sys.stdout.write(render_recall(grid))
    if failed:
        errors = sorted({result.error or f"HTTP {result.status}" for result in failed})
        print(f"{len(failed)} probe(s) failed and are not scored: {', '.join(errors)}")
    print(f"boundary: {summary}")
    if not verdict.answering and not grid.empty:
        print("check that the model answers at all: an empty answer (a --max-tokens too small for a reasoning"
              " model, a content filter) or another model behind the name recalls nothing")  # fmt: skip
    return verdict
