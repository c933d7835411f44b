"""The ``LedgerSource`` of the PostgreSQL archive (``gateway.ledger.source``): events streamed through
server-side cursors (a few thousand rows held at a time), whole days from the daily rollups, export files
written by the server (``gateway.ledger.archive_export``).

Each call opens its own connection for as long as it reads, so a long export never holds up a summary.
The URL may name a read replica: nothing here writes. ``usage`` reads Redis (``live``), where the current
day's and month's counters are exact the moment an event is written, and where budgets are enforced.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from datetime import date

import psycopg

from gateway.base.errors import ServiceUnavailable
from gateway.ledger.archive_export import export_text
from gateway.ledger.archive_schema import (
    COUNTER_COLUMNS,
    Connection,
    connect,
    has_export_columns,
    month_bounds,
)
from gateway.ledger.counters import Counters
from gateway.ledger.event import CostEvent
from gateway.ledger.formats import encode_events
from gateway.ledger.period import Period, day_of
from gateway.ledger.source import (
    DayCounters,
    ExportFormat,
    LedgerSource,
    TenantUsage,
    merge_blocks,
    time_of,
)

ROWS_PER_FETCH = 5_000

_EVENTS = """
SELECT event::text FROM ledger_events
WHERE tenant = %s AND month >= %s AND month <= %s AND time_ms >= %s AND time_ms < %s
ORDER BY time_ms, stream_id
"""
_DAYS = f"""
SELECT tenant, day, model, {", ".join(COUNTER_COLUMNS)} FROM ledger_daily
WHERE tenant = ANY(%s) AND day >= %s AND day <= %s
ORDER BY tenant, day, model
"""


async def _connect(url: str, *, autocommit: bool = False) -> Connection:
    try:
        return await connect(url, autocommit=autocommit)
    except psycopg.OperationalError as exc:
        raise ServiceUnavailable(
            f"the ledger archive cannot be reached: {str(exc).strip()}", code="archive_unavailable"
        ) from exc


async def _created(connection: Connection) -> bool:
    """Whether the archive's tables exist (a drainer creates them when it first writes)."""
    cursor = await connection.execute("SELECT to_regclass('ledger_daily') IS NOT NULL")
    found = await cursor.fetchone()
    return bool(found and found[0])


class ArchiveReader:
    def __init__(self, url: str, *, live: LedgerSource | None = None) -> None:
        self.url = url
        self._live = live

    async def tenants(self) -> list[str]:
        async with await _connect(self.url, autocommit=True) as connection:
            if not await _created(connection):
                return []
            cursor = await connection.execute("SELECT tenant FROM ledger_tenants")
            return sorted(str(row[0]) for row in await cursor.fetchall())

    async def events(self, tenant: str, period: Period) -> AsyncIterator[CostEvent]:
        async for event in self.merged_events([tenant], period):
            yield event

    async def merged_events(self, tenants: Sequence[str], period: Period) -> AsyncIterator[CostEvent]:
        months = period.months()
        first, last = month_bounds(months[0])[0], month_bounds(months[-1])[0]
        async with await _connect(self.url) as connection, connection.transaction():
            if not await _created(connection):
                return
            sources = []
            try:
                for number, tenant in enumerate(tenants):
                    cursor = connection.cursor(name=f"ledger_events_{number}")
                    await cursor.execute(_EVENTS, (tenant, first, last, period.start_ms, period.end_ms))
                    sources.append(_pages(cursor))
                async for event in merge_blocks(sources, key=time_of):
                    yield event
            finally:  # a reader that stops early: each page being fetched lands before the cursors close
                for source in sources:
                    await source.aclose()

    async def export(self, tenants: Sequence[str], period: Period, fmt: ExportFormat) -> AsyncIterator[bytes]:
        async with await _connect(self.url) as connection, connection.transaction():
            if not await _created(connection):
                async for chunk in encode_events(_nothing(), fmt):
                    yield chunk
                return
            rendered = await has_export_columns(connection)
            async for chunk in export_text(connection, tenants, period, fmt, rendered=rendered):
                yield chunk

    async def daily_counters(self, tenants: Sequence[str], days: Period) -> AsyncIterator[DayCounters]:
        first, last = date.fromisoformat(day_of(days.start_ms)), date.fromisoformat(day_of(days.end_ms - 1))
        async with await _connect(self.url, autocommit=True) as connection:
            if not await _created(connection):
                return
            cursor = await connection.execute(_DAYS, (list(tenants), first, last))
            current: tuple[str, str] | None = None
            models: dict[str, Counters] = {}
            async for tenant, day, model, *values in cursor:
                key = (str(tenant), _iso(day))
                if key != current:
                    if current is not None:
                        yield (*current, _with_overall(models))
                    current, models = key, {}
                models[str(model)] = Counters(*(int(str(value)) for value in values))
            if current is not None:
                yield (*current, _with_overall(models))

    async def usage(self, tenant: str, *, now_ms: int) -> TenantUsage:
        if self._live is None:
            raise RuntimeError("a tenant's usage is read from Redis: this archive reader was given none")
        return await self._live.usage(tenant, now_ms=now_ms)


async def _pages(
    cursor: psycopg.AsyncServerCursor[tuple[object, ...]],
) -> AsyncGenerator[list[CostEvent], None]:
    """The cursor's events, ``ROWS_PER_FETCH`` rows a round trip. The next page is asked for before this
    one is parsed, so the server reads it while this process parses (two pages held at most)."""
    parse = CostEvent.from_json
    upcoming = asyncio.ensure_future(cursor.fetchmany(ROWS_PER_FETCH))
    try:
        while rows := await upcoming:
            upcoming = asyncio.ensure_future(cursor.fetchmany(ROWS_PER_FETCH))
            yield [parse(row[0]) for row in rows]  # type: ignore[arg-type]  # json arrives as text
    finally:  # stopped early: the page asked for is let in (cancelling it would break the connection)
        with contextlib.suppress(psycopg.Error):
            await upcoming


async def _nothing() -> AsyncIterator[CostEvent]:
    return
    yield


def _iso(day: object) -> str:
    return day.isoformat() if isinstance(day, date) else str(day)


def _with_overall(models: dict[str, Counters]) -> dict[str, Counters]:
    overall = Counters()
    for counters in models.values():
        overall += counters
    return {"": overall, **models}


__all__ = ["ArchiveReader"]
