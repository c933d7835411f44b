"""The archive's exports: CSV, JSON, NDJSON and FOCUS files written by PostgreSQL, byte for byte what
``gateway.ledger.formats.encode_events`` writes from the same events read from Redis.

One query merges the tenants' events in time order (each tenant's index read in order, ties to the tenant
listed first: ``merged_events``' order) and renders each plain row's text in SQL (``export_sql``,
``focus_sql``); the gateway only joins the texts into chunks. Past ``GROUP_TENANTS`` tenants, one query
per group of them (planning one grows faster than its tenants), merged by the gateway. A row that is not
plain (archived before the export columns existed, or holding text a format must quote, escape or defuse)
comes back as its JSON, which the gateway renders as it renders Redis's events (``formats.event_text``).
Rows come through server-side cursors, a page at a time, the next page asked for while this one is joined.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator, Sequence

import psycopg

from gateway.ledger.archive_schema import STORED_COLUMNS, Connection, month_bounds
from gateway.ledger.event import CostEvent
from gateway.ledger.export_sql import csv_line, json_line
from gateway.ledger.focus import FOCUS_COLUMNS
from gateway.ledger.focus_sql import focus_rows, focus_steps
from gateway.ledger.formats import EVENT_COLUMNS, closing, event_text, opening
from gateway.ledger.period import Period
from gateway.ledger.source import ExportFormat, merge_blocks

ROWS_PER_FETCH = 2_000
GROUP_TENANTS = 32
"""Tenants one query merges (its planning takes about 20 ms with 32, 0.3 s with 128)."""
_ORDER = "ORDER BY time_ms, position, stream_id"
_ONE_TENANT = """SELECT * FROM (
    SELECT {columns}, {position} AS position FROM ledger_events
    WHERE tenant = %s AND month >= %s AND month <= %s AND time_ms >= %s AND time_ms < %s
    ORDER BY time_ms, stream_id OFFSET 0
) AS tenant_{position}"""
"""One tenant's events in its index's order. Merged (``UNION ALL`` of these, ordered), they are read by a
``Merge Append`` of the tenants' index scans, and ties in time put in the tenants' order by an incremental
sort of each millisecond's events: nothing is sorted whole (the transaction turns plain sorts off)."""
_RENDERED_FROM = ", ".join(name for name in STORED_COLUMNS if name != "event")
"""What rows are rendered from: not ``event``, which a rendered row does not need (it is looked up for the
others: the sort of each millisecond's rows then moves a fraction of the bytes)."""
_EVENT = (
    "(SELECT stored.event::text FROM ledger_events AS stored"
    " WHERE stored.month = steps.month AND stored.tenant = steps.tenant AND stored.id = steps.id)"
)

Layers = list[dict[str, str]]
Row = tuple[bytes | None, str | None] | tuple[bytes | None, str | None, int]
"""A row of the query: the rows' text, or the event's JSON (and the time, when merged)."""


def export_query(fmt: ExportFormat, tenants: int, *, rendered: bool, timed: bool = False) -> str:
    """The query of an export over ``tenants`` tenants (each given its five parameters: the tenant, the
    first and last month, the start and end ms), answering ``(text, json)`` per event: the rows' text
    when the server rendered them, else the event's JSON; ``timed``: and its time, to merge by.
    ``rendered=False``: none rendered (an archive without the export columns)."""
    columns = _RENDERED_FROM if rendered else "month, tenant, id, time_ms, stream_id"
    merged = " UNION ALL ".join(
        _ONE_TENANT.format(columns=columns, position=number) for number in range(tenants)
    )
    query = f"SELECT * FROM ({merged}) AS merged {_ORDER}"
    layers: Layers = []
    text, rendering = "NULL::text", "false"
    if rendered:
        layers, text, rendering = _rendering(fmt)
    for number, layer in enumerate(layers):
        computed = ", ".join(f"{sql.replace('%', '%%')} AS {name}" for name, sql in layer.items())
        query = f"SELECT *, {computed} FROM ({query}) AS step_{number} {_ORDER}"
    return (
        f"SELECT CASE WHEN {rendering} THEN convert_to({text.replace('%', '%%')}, 'UTF8') END AS rendered,"
        f" CASE WHEN {rendering} THEN NULL ELSE {_EVENT} END AS event{', time_ms' if timed else ''}"
        f" FROM ({query}) AS steps {_ORDER}"
    )


def _rendering(fmt: ExportFormat) -> tuple[Layers, str, str]:
    """The steps before the last, the rows' text, and which rows have it."""
    if fmt == "focus":
        return focus_steps(), focus_rows(), "focus_plain"
    return [], csv_line() if fmt == "csv" else json_line(), "coalesce(plain, false)"


def export_parameters(tenants: Sequence[str], period: Period) -> list[object]:
    months = period.months()
    first, last = month_bounds(months[0])[0], month_bounds(months[-1])[0]
    return [value for tenant in tenants for value in (tenant, first, last, period.start_ms, period.end_ms)]


async def export_text(
    connection: Connection, tenants: Sequence[str], period: Period, fmt: ExportFormat, *, rendered: bool
) -> AsyncIterator[bytes]:
    """The export file, in chunks (a page of events each; the first once the first page is read, so that
    a query that fails fails before anything is sent). ``connection`` is in a transaction (the cursor
    lives in it)."""
    columns = FOCUS_COLUMNS if fmt == "focus" else EVENT_COLUMNS
    kind = "csv" if fmt == "focus" else fmt
    start = opening(kind, columns).encode()
    if tenants:
        render = event_text(fmt)
        await connection.execute("SET LOCAL enable_sort = off")  # the query merges: no sort is needed
        await connection.execute("SET LOCAL jit = off")  # compiling its expressions costs more than it saves
        await connection.execute("SET LOCAL DateStyle = 'ISO'")  # the FOCUS times (``focus_sql``)
        groups = [tenants[first : first + GROUP_TENANTS] for first in range(0, len(tenants), GROUP_TENANTS)]
        sources = []
        for number, group in enumerate(groups):
            cursor = connection.cursor(name=f"ledger_export_{number}", binary=True)  # the rows' text: bytes
            query = export_query(fmt, len(group), rendered=rendered, timed=len(groups) > 1)
            await cursor.execute(query, export_parameters(group, period))
            sources.append(_pages(cursor))
        pages = sources[0] if len(sources) == 1 else _merged(sources)
        async for rows in pages:
            parse = CostEvent.from_json
            body = [
                line if (line := row[0]) is not None else render(parse(row[1] or "")).encode() for row in rows
            ]
            if kind == "csv":
                body.insert(0, start)  # the header, on the first page
                yield b"".join(body)
            elif kind == "ndjson":
                body.append(b"")  # every line ended
                yield b"\n".join(body)
            else:  # the array's elements, a line each
                yield (start + b"\n" if start else b",\n") + b",\n".join(body)
            start = b""
    yield start + closing(kind).encode()


async def _merged(sources: Sequence[AsyncIterator[Sequence[Row]]]) -> AsyncIterator[list[Row]]:
    """The groups' rows merged in time (ties to the group listed first), in pages again."""
    page: list[Row] = []
    async for row in merge_blocks(sources, key=_time_of_row):
        page.append(row)
        if len(page) == ROWS_PER_FETCH:
            yield page
            page = []
    if page:
        yield page


def _time_of_row(row: Row) -> int:
    return int(row[2])  # type: ignore[misc]  # the query's third column: time_ms


async def _pages(cursor: psycopg.AsyncServerCursor[tuple[object, ...]]) -> AsyncGenerator[list[Row], None]:
    """The cursor's rows, ``ROWS_PER_FETCH`` a round trip; the next page is asked for before this one is
    handed on (two pages held at most), so that the server renders it while the gateway joins this one.
    The task that asks for it runs only once the event loop does: it is let run up to sending the
    ``FETCH`` (its first wait, for the answer) before the page goes out, else it would be sent only when
    the next page is awaited, and the two would take turns."""
    upcoming = asyncio.ensure_future(cursor.fetchmany(ROWS_PER_FETCH))
    try:
        while rows := await upcoming:
            upcoming = asyncio.ensure_future(cursor.fetchmany(ROWS_PER_FETCH))
            await asyncio.sleep(0)  # the FETCH sent
            yield rows  # type: ignore[misc]  # (bytes or NULL, text or NULL) by the query
    finally:  # stopped early: the page asked for is let in (cancelling it would break the connection)
        with contextlib.suppress(psycopg.Error):
            await upcoming
