"""``gateway experiments report NAME`` (primary against candidate by context length, the projected monthly
cost difference, the verdicts) and ``gateway experiments list`` (the configured experiments and their
shadow spend today).

Both read the gateway's Redis: ``--redis-url``, else ``GATEWAY_REDIS_URL``, else the unix socket of the
embedded server in the data directory. The experiments, the key prefix (``ledger.key_prefix``) and the
buckets (``sampling.buckets``) come from ``--config`` (default ``GATEWAY_CONFIG``) when that file loads,
else from the defaults: the report of an experiment no config names is then of its data alone.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import orjson

from gateway.base.money import nanos_from_usd
from gateway.commands.store import (
    CommandError,
    gateway_config,
    open_store,
    redis_url,
    run_command,
    since_of,
    store_options,
)
from gateway.config.settings import Settings
from gateway.experiments.report.figures import dollars
from gateway.experiments.report.html import render_html
from gateway.experiments.report.reading import Listed, Setting, list_experiments, read_report
from gateway.experiments.report.report import report_document
from gateway.experiments.report.table import render_report


def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    experiments = subparsers.add_parser(
        "experiments", help="shadow and split experiments: their reports", description=__doc__
    )
    actions = experiments.add_subparsers(dest="experiments_action", required=True, metavar="ACTION")
    report = actions.add_parser("report", help="primary against candidate by context length, cost, verdicts")
    report.add_argument("name", metavar="NAME", help="the experiment's name in the config")
    report.add_argument("--since", default="7d", help="duration back (30m, 24h, 7d) or ISO date; default 7d")
    output = report.add_mutually_exclusive_group()
    output.add_argument("--html", type=Path, metavar="FILE", help="write a self-contained HTML report here")
    output.add_argument("--json", action="store_true", help="print the report as JSON")
    store_options(report)
    report.set_defaults(handler=run_report)
    listing = actions.add_parser("list", help="the configured experiments and their spend today")
    listing.add_argument("--json", action="store_true", help="print the list as JSON")
    store_options(listing)
    listing.set_defaults(handler=run_list)


def run_report(args: argparse.Namespace) -> int:
    return run_command(_report(args, Settings()), command="experiments", redis_problem="cannot read Redis")


def run_list(args: argparse.Namespace) -> int:
    return run_command(_list(args, Settings()), command="experiments", redis_problem="cannot read Redis")


def _setting(path: Path | None, settings: Settings) -> Setting:
    return Setting.of(gateway_config(path, settings, defaults="settings (no experiments configured)"))


async def _report(args: argparse.Namespace, settings: Settings) -> int:
    setting = _setting(args.config, settings)
    now = time.time()
    since = since_of(args.since, now=now)
    until_ms = int(now * 1000) + 1
    since_ms = min(int(since * 1000), until_ms - 1)
    client = await open_store(redis_url(args.redis_url, settings), settings)
    try:
        report = await read_report(
            client, name=args.name, setting=setting, since_ms=since_ms, until_ms=until_ms
        )
    finally:
        await client.aclose()
    if report is None:
        configured = ", ".join(name for name, _ in setting.experiments) or "none"
        raise CommandError(f"no experiment named {args.name!r}: not configured (configured: {configured}) "
                           "and no data in Redis")  # fmt: skip
    if args.html is not None:
        args.html.write_text(render_html(report), encoding="utf-8")
        print(f"wrote {args.html} ({report.pairs:,} pairs in {len(report.buckets)} buckets)")
    elif args.json:
        sys.stdout.write(orjson.dumps(report_document(report), option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        sys.stdout.write(render_report(report))
    return 0


async def _list(args: argparse.Namespace, settings: Settings) -> int:
    setting = _setting(args.config, settings)
    client = await open_store(redis_url(args.redis_url, settings), settings)
    try:
        listed = await list_experiments(client, setting=setting, now_ms=int(time.time() * 1000))
    finally:
        await client.aclose()
    if args.json:
        body = [item.document() for item in listed]
        sys.stdout.write(orjson.dumps(body, option=orjson.OPT_INDENT_2).decode() + "\n")
    elif not listed:
        print("no experiments configured")
    else:
        sys.stdout.write(render_list(listed))
    return 0


def render_list(listed: list[Listed]) -> str:
    header = ("name", "mode", "primary", "candidate", "sample rate", "enabled", "budget a day", "spent today")
    rows = [
        (
            item.name, item.config.mode, ",".join(item.config.primary), item.config.candidate,
            f"{item.config.sample_rate:g}", "yes" if item.config.enabled else "no",
            _budget(item),
            dollars(item.spent_today_nanos),
        )
        for item in listed
    ]  # fmt: skip
    widths = [max(len(cell) for cell in column) for column in zip(header, *rows, strict=True)]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
             for row in (header, *rows)]  # fmt: skip
    return "\n".join(lines) + "\n"


def _budget(item: Listed) -> str:
    budget = item.config.budget_usd_per_day
    return dollars(nanos_from_usd(budget)) if budget is not None else "-"
