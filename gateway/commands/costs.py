"""``gateway costs export|summary|models``: finance reads the ledger straight from where the gateway keeps
it.

With an archive (``--archive URL``, else, unless ``--redis-url`` is given, the ``ledger.archive`` of
``--config``), the command reads the PostgreSQL archive (a read replica of it works too) and needs no Redis;
otherwise it reads Redis.

The Redis is ``--redis-url``, else ``GATEWAY_REDIS_URL``, else the unix socket of the embedded server in
the data directory (``<GATEWAY_DATA_DIR>/redis/redis.sock``), when the gateway runs one. The ledger's keys
start with ``--key-prefix``, else the ``ledger.key_prefix`` of ``--config`` (default ``GATEWAY_CONFIG``)
when that file loads, else ``gw``.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import IO, Any

import orjson
import redis.asyncio as aioredis

from gateway.analysis.costs import cost_view, document
from gateway.analysis.costs_render import table as models_table
from gateway.analysis.window import window
from gateway.base.errors import ServiceUnavailable
from gateway.commands.store import CommandError, gateway_config, open_store, redis_url, run_command
from gateway.config.schema.ledger import LedgerConfig
from gateway.config.schema.root import GatewayConfig
from gateway.config.settings import Settings
from gateway.ledger.formats import FORMATS, counters_row, encode_summary
from gateway.ledger.keys import LedgerKeys
from gateway.ledger.period import Period, iso_time
from gateway.ledger.reader import LedgerReader
from gateway.ledger.source import ExportFormat, LedgerSource
from gateway.ledger.sources import ledger_source
from gateway.ledger.summary import UNTAGGED, SummaryRow, basis_of, group_by, summarize, total

PROGRESS_EVERY = 1 << 20
"""Bytes between two updates of the progress shown on a terminal."""


def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    parser = subparsers.add_parser("costs", help="export cost events or summarise spend", description=__doc__)
    actions = parser.add_subparsers(dest="costs_action", required=True, metavar="ACTION")
    export = actions.add_parser("export", help="cost events in time order, to stdout or a file")
    _period_options(export)
    export.add_argument("--format", choices=FORMATS, default="csv")
    export.add_argument("-o", "--output", type=Path, help="write here instead of stdout")
    export.set_defaults(handler=run_export)
    summary = actions.add_parser("summary", help="totals per tenant, model, day or tag")
    _period_options(summary)
    summary.add_argument(
        "--group-by",
        type=_group_by,
        default="tenant",
        metavar="{tenant,model,day,tag:KEY}",
        help="tag:KEY: by the value of the caller's tag KEY (reads every event of the period)",
    )
    summary.add_argument("--format", choices=("table", "csv", "json"), default="table")
    summary.set_defaults(handler=run_summary)
    models = actions.add_parser(
        "models", help="the total cost per model and context length: spend, latency, failures, retries"
    )
    _period_options(models)
    models.add_argument(
        "--since", help="a duration back from now (7d, 24h) or a date; default 7d (--from wins over it)"
    )
    models.add_argument("--format", choices=("table", "json"), default="table")
    models.set_defaults(handler=run_models)


def _group_by(text: str) -> str:
    try:
        return group_by(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _period_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tenant", help="one tenant (default: every tenant with events)")
    parser.add_argument(
        "--from", dest="start", help="date or ISO datetime, UTC (default: this month's start)"
    )
    parser.add_argument("--to", dest="end", help="date (inclusive) or ISO datetime (exclusive); default: now")
    parser.add_argument("--redis-url", help="Redis of the running gateway (default: GATEWAY_REDIS_URL)")
    parser.add_argument("--config", type=Path, help="the gateway's config file (default: GATEWAY_CONFIG)")
    parser.add_argument(
        "--key-prefix", help="the ledger's key prefix (default: the config's ledger.key_prefix)"
    )
    parser.add_argument(
        "--archive",
        help="read this PostgreSQL archive (postgresql://…; default: the config's ledger.archive)",
    )


def run_export(args: argparse.Namespace) -> int:
    return run_command(_export(args), command="costs", redis_problem="cannot read the ledger")


def run_summary(args: argparse.Namespace) -> int:
    return run_command(_summary(args), command="costs", redis_problem="cannot read the ledger")


def run_models(args: argparse.Namespace) -> int:
    return run_command(_models(args), command="costs", redis_problem="cannot read the ledger")


def key_prefix(args: argparse.Namespace, settings: Settings) -> str:
    if args.key_prefix:
        return str(args.key_prefix)
    return _ledger_config(args, settings).key_prefix


def _ledger_config(args: argparse.Namespace, settings: Settings) -> LedgerConfig:
    config = gateway_config(args.config, settings, defaults="ledger key prefix")
    return config.ledger if config is not None else LedgerConfig()


def _parse_period(args: argparse.Namespace) -> Period:
    try:
        return Period.parse(args.start, args.end, now_ms=int(time.time() * 1000))
    except ValueError as exc:
        raise CommandError(f"invalid --from/--to: {exc}") from exc


async def _open(args: argparse.Namespace) -> tuple[aioredis.Redis | None, LedgerSource]:
    """The archive when there is one (no Redis then), else the gateway's Redis."""
    settings = Settings()
    archive = args.archive
    if not archive and not args.redis_url:  # an explicit --redis-url reads Redis
        archive = _ledger_config(args, settings).archive
    if archive:
        if not str(archive).startswith(("postgresql://", "postgres://")):
            raise CommandError("--archive must be a postgresql:// URL")
        return None, ledger_source(LedgerConfig(), None, archive=archive)
    prefix = key_prefix(args, settings)
    client = await open_store(redis_url(args.redis_url, settings), settings)
    return client, LedgerReader(client, keys=LedgerKeys(prefix))


async def _close(client: aioredis.Redis | None) -> None:
    if client is not None:
        await client.aclose()


async def _tenants(args: argparse.Namespace, reader: LedgerSource) -> list[str]:
    return [args.tenant] if args.tenant else await reader.tenants()


async def _export(args: argparse.Namespace) -> None:
    period = _parse_period(args)
    client, reader = await _open(args)
    try:
        tenants = await _tenants(args, reader)
        fmt: ExportFormat = args.format
        chunks = _shown(reader.export(tenants, period, fmt))
        if args.output is None:
            await _write(chunks, sys.stdout.buffer)
        else:
            with open(args.output, "wb") as handle:
                await _write(chunks, handle)
    except ServiceUnavailable as exc:
        raise CommandError(exc.message) from exc
    finally:
        await _close(client)


async def _write(chunks: AsyncIterator[bytes], out: IO[bytes]) -> None:
    async for chunk in chunks:
        out.write(chunk)
    out.flush()


async def _shown(chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """Passes the export's chunks through, showing how much was written on stderr when it is a terminal."""
    show = sys.stderr.isatty()
    written = shown = 0
    async for chunk in chunks:
        written += len(chunk)
        if show and written - shown >= PROGRESS_EVERY:
            print(f"\rexported {written / 1e6:,.1f} MB", end="", file=sys.stderr, flush=True)
            shown = written
        yield chunk
    if show:
        print(f"\rexported {written / 1e6:,.1f} MB", file=sys.stderr, flush=True)


async def _summary(args: argparse.Namespace) -> None:
    period = _parse_period(args)
    client, reader = await _open(args)
    try:
        tenants = await _tenants(args, reader)
        rows = await summarize(reader, tenants=tenants, period=period, group_by=args.group_by)
    except ServiceUnavailable as exc:
        raise CommandError(exc.message) from exc
    finally:
        await _close(client)
    if args.format == "table":
        print(f"{iso_time(period.start_ms)} to {iso_time(period.end_ms)} ({basis_of(period, args.group_by)})")
        sys.stdout.write(table(rows, group_by=args.group_by))
        return
    async for chunk in encode_summary(rows, args.format, group_by=args.group_by):
        sys.stdout.buffer.write(chunk)
    sys.stdout.buffer.flush()


async def _models(args: argparse.Namespace) -> None:
    try:
        period = window(args.since, args.start, args.end, now_ms=int(time.time() * 1000))
    except ValueError as exc:
        raise CommandError(f"invalid --since/--from/--to: {exc}") from exc
    settings = Settings()
    config = gateway_config(args.config, settings, defaults="buckets") or GatewayConfig(
        providers={}, models={}
    )
    client, reader = await _open(args)
    try:
        view = await cost_view(reader.merged_events(await _tenants(args, reader), period), config)
    except ServiceUnavailable as exc:
        raise CommandError(exc.message) from exc
    finally:
        await _close(client)
    body = document(view, config, period={"from": iso_time(period.start_ms), "to": iso_time(period.end_ms)})
    if args.format == "json":
        sys.stdout.buffer.write(orjson.dumps(body, option=orjson.OPT_INDENT_2) + b"\n")
        sys.stdout.buffer.flush()
        return
    sys.stdout.write(models_table(body))


def table(rows: list[SummaryRow], *, group_by: str) -> str:
    """Aligned columns with a total line; numbers right-aligned."""
    header = [group_by, *counters_row(total(rows))]
    untagged = "(none)" if group_by.startswith("tag:") else UNTAGGED
    lines = [[row.key or untagged, *map(str, counters_row(row.counters).values())] for row in rows]
    lines.append(["TOTAL", *map(str, counters_row(total(rows)).values())])
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *lines, strict=True)]

    def render(cells: list[str]) -> str:
        first = cells[0].ljust(widths[0])
        rest = (cell.rjust(width) for cell, width in zip(cells[1:], widths[1:], strict=True))
        return "  ".join([first, *rest]).rstrip() + "\n"

    rule = "  ".join("-" * width for width in widths) + "\n"
    return render(header) + rule + "".join(render(line) for line in lines[:-1]) + rule + render(lines[-1])
