"""``gateway replay --config candidate.yaml``: the recorded traffic of a period, re-decided and re-priced
under a candidate config, side by side with what happened (``gateway.analysis.replay``).

The ledger is read as ``gateway costs`` reads it (``--redis-url``, else ``GATEWAY_REDIS_URL``, else the
embedded server's socket), under ``--key-prefix``, else the candidate's ``ledger.key_prefix``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

import orjson

from gateway.analysis.candidate import parse_candidate
from gateway.analysis.replay import replay
from gateway.analysis.replay_report import document, page, table
from gateway.commands.store import CommandError, open_store, redis_url, run_command
from gateway.config.settings import Settings
from gateway.ledger.keys import LedgerKeys
from gateway.ledger.period import Period, iso_time
from gateway.ledger.sources import ledger_source


def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    parser = subparsers.add_parser(
        "replay", help="re-decide and re-price recorded traffic under a candidate config", description=__doc__
    )
    parser.add_argument("--config", type=Path, required=True, help="the candidate config file")
    parser.add_argument(
        "--from", dest="start", help="date or ISO datetime, UTC (default: this month's start)"
    )
    parser.add_argument("--to", dest="end", help="date (inclusive) or ISO datetime (exclusive); default: now")
    parser.add_argument("--tenant", help="one tenant (default: every tenant with events)")
    parser.add_argument("--format", choices=("table", "json", "html"), default="table")
    parser.add_argument("--redis-url", help="Redis of the running gateway (default: GATEWAY_REDIS_URL)")
    parser.add_argument("--key-prefix", help="the ledger's key prefix (default: the candidate's)")
    parser.set_defaults(handler=run_replay)


def run_replay(args: argparse.Namespace) -> int:
    return run_command(_replay(args), command="replay", redis_problem="cannot read the ledger")


async def _replay(args: argparse.Namespace) -> None:
    path: Path = args.config
    if not path.is_file():
        raise CommandError(f"no config file at {path}")
    try:
        candidate = parse_candidate(path.read_text(encoding="utf-8"), path, os.environ)
        period = Period.parse(args.start, args.end, now_ms=int(time.time() * 1000))
    except ValueError as exc:
        raise CommandError(str(exc)) from exc
    settings = Settings()
    client = await open_store(redis_url(args.redis_url, settings), settings)
    try:
        keys = LedgerKeys(args.key_prefix or candidate.config.ledger.key_prefix)
        reader = ledger_source(candidate.config.ledger, client, keys=keys)  # its archive, if it names one
        tenants = [args.tenant] if args.tenant else await reader.tenants()
        result = await replay(
            lambda: reader.merged_events(tenants, period), candidate.config, candidate.engine
        )
    finally:
        await client.aclose()
    body = document(
        result,
        period={"from": iso_time(period.start_ms), "to": iso_time(period.end_ms)},
        candidate=str(path),
    )
    if args.format == "json":
        sys.stdout.buffer.write(orjson.dumps(body, option=orjson.OPT_INDENT_2) + b"\n")
        sys.stdout.buffer.flush()
        return
    sys.stdout.write(page(body) if args.format == "html" else table(body))
