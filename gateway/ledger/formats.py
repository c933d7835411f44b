"""Export formats: events and summaries as CSV, JSON or NDJSON, amounts as exact decimal USD strings.

Encoders are async generators of byte chunks (about ``chunk_bytes`` each), so an export of any length
streams with the memory of one chunk.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from typing import Literal

import orjson

from gateway.base.money import usd
from gateway.ledger.event import CostEvent
from gateway.ledger.focus import FOCUS_COLUMNS, focus_rows, focus_values
from gateway.ledger.period import iso_time
from gateway.ledger.source import ExportFormat
from gateway.ledger.summary import Counters, SummaryRow

SummaryFormat = Literal["csv", "json", "ndjson"]
FORMATS: tuple[ExportFormat, ...] = ("csv", "json", "ndjson", "focus")
"""``focus``: CSV in FinOps FOCUS 1.2 columns (``gateway.ledger.focus``)."""
MEDIA_TYPES: dict[ExportFormat, str] = {
    "csv": "text/csv; charset=utf-8",
    "json": "application/json",
    "ndjson": "application/x-ndjson",
    "focus": "text/csv; charset=utf-8",
}
EXTENSIONS: dict[ExportFormat, str] = {"csv": "csv", "json": "json", "ndjson": "ndjson", "focus": "focus.csv"}

FORMULA_STARTS = frozenset("=+-@\t\r")
_NUMBER = re.compile(r"-?\d+(\.\d+)?")

Value = str | int | bool | dict[str, str] | None
Row = dict[str, Value]

EVENT_COLUMNS = (
    "id", "time", "tenant", "key_id", "requested_model", "model", "provider", "action",
    "input_tokens", "cached_tokens", "output_tokens", "reasoning_tokens", "tier",
    "cost_usd", "counterfactual_usd", "saving_usd",
    "estimated", "parent_id", "status", "latency_ms", "stream", "client_request_id",
    "counterfactual_cached_tokens", "counterfactual_basis", "cache_write_tokens", "reason",
    "tool_uses", "tool_cost_usd",
    "input_cost_usd", "cached_input_cost_usd", "cache_write_cost_usd", "output_cost_usd", "conversation",
    "band", "tags",
)  # fmt: skip
"""``tags``: the caller's tags, a JSON object (its text in CSV: ``{"team":"search"}``), empty for none."""


def event_values(event: CostEvent) -> tuple[Value, ...]:
    """The event's export fields, in ``EVENT_COLUMNS`` order."""
    return (
        event.id, iso_time(event.time_ms), event.tenant, event.key_id, event.requested_model, event.model,
        event.provider, event.action, event.input_tokens, event.cached_tokens, event.output_tokens,
        event.reasoning_tokens, event.tier, usd(event.cost_nanos), usd(event.counterfactual_nanos),
        usd(event.saving_nanos), event.estimated, event.parent_id, event.status, event.latency_ms,
        event.stream, event.client_request_id, event.counterfactual_cached_tokens, event.counterfactual_basis,
        event.cache_write_tokens, event.reason, event.tool_uses, usd(event.tool_cost_nanos),
        *_parts(event), event.conversation, event.band, event.tags,
    )  # fmt: skip


def _parts(event: CostEvent) -> tuple[str | None, ...]:
    """The cost by priced unit (empty on events recorded before it was)."""
    parts = event.cost_parts
    if parts is None:
        return (None, None, None, None)
    return (usd(parts[0]), usd(parts[1]), usd(parts[2]), usd(parts[3]))


def counters_row(counters: Counters) -> Row:
    return {
        "requests": counters.requests,
        "cost_usd": usd(counters.cost_nanos),
        "counterfactual_usd": usd(counters.cost_nanos + counters.saving_nanos),
        "saving_usd": usd(counters.saving_nanos),
        "input_tokens": counters.input_tokens,
        "cached_tokens": counters.cached_tokens,
        "output_tokens": counters.output_tokens,
        "reasoning_tokens": counters.reasoning_tokens,
    }


def summary_rows(rows: Sequence[SummaryRow], *, group_by: str) -> list[Row]:
    return [{group_by: row.key, **counters_row(row.counters)} for row in rows]


async def encode_events(
    events: AsyncIterator[CostEvent], fmt: ExportFormat, *, chunk_bytes: int = 64 * 1024
) -> AsyncIterator[bytes]:
    if fmt == "focus":
        focus = focus_values(events)
        async for chunk in encode_rows(focus, "csv", columns=FOCUS_COLUMNS, chunk_bytes=chunk_bytes):
            yield chunk
        return
    rows = (event_values(event) async for event in events)
    async for chunk in encode_rows(rows, fmt, columns=EVENT_COLUMNS, chunk_bytes=chunk_bytes):
        yield chunk


async def encode_rows(
    rows: AsyncIterator[Sequence[Value]],
    fmt: SummaryFormat,
    *,
    columns: Sequence[str],
    chunk_bytes: int = 64 * 1024,
) -> AsyncIterator[bytes]:
    """Rows of values in ``columns`` order → CSV (with a header), a JSON array or NDJSON, in chunks."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\r\n")
    buffer.write(opening(fmt, columns))
    separator = "\n"
    async for row in rows:
        if fmt == "csv":
            writer.writerow(csv_cells(row))
        elif fmt == "json":
            buffer.write(separator + json_text(columns, row))
            separator = ",\n"
        else:
            buffer.write(json_text(columns, row) + "\n")
        if buffer.tell() >= chunk_bytes:
            yield buffer.getvalue().encode()
            buffer.seek(0)
            buffer.truncate()
    buffer.write(closing(fmt))
    yield buffer.getvalue().encode()


def opening(fmt: SummaryFormat, columns: Sequence[str]) -> str:
    """What a file in ``fmt`` starts with: the CSV header, the JSON array's bracket."""
    if fmt == "csv":
        header = io.StringIO()
        csv.writer(header, lineterminator="\r\n").writerow(columns)
        return header.getvalue()
    return "[" if fmt == "json" else ""


def closing(fmt: SummaryFormat) -> str:
    return "\n]\n" if fmt == "json" else ""


def csv_cells(row: Sequence[Value]) -> list[str | int | None]:
    """A row's cells as the csv writer takes them: most are numbers, empty or plain text, and only the
    others go through ``_cell``."""
    return [
        value
        if type(value) is int or value is None or (isinstance(value, str) and value[:1] not in FORMULA_STARTS)
        else _cell(value)
        for value in row
    ]


def json_text(columns: Sequence[str], row: Sequence[Value]) -> str:
    """A row as a JSON object, keys in ``columns`` order, compact."""
    return orjson.dumps(dict(zip(columns, row, strict=True))).decode()


def event_text(fmt: ExportFormat) -> Callable[[CostEvent], str]:
    """An event's rows in ``fmt``, as ``encode_events`` writes them: CSV and FOCUS rows each ended by
    ``\r\n``, the JSON formats' object without a line end."""
    if fmt in ("json", "ndjson"):
        return lambda event: json_text(EVENT_COLUMNS, event_values(event))
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\r\n")

    def csv_text(event: CostEvent) -> str:
        buffer.seek(0)
        buffer.truncate()
        if fmt == "focus":
            writer.writerows(csv_cells(row) for row in focus_rows(event))
        else:
            writer.writerow(csv_cells(event_values(event)))
        return buffer.getvalue()

    return csv_text


def _cell(value: Value) -> str | int | None:
    """CSV cell text; text a spreadsheet would run as a formula is prefixed with ``'`` (amounts never are)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
    if isinstance(value, str) and value[:1] in FORMULA_STARTS and not _NUMBER.fullmatch(value):
        return "'" + value
    return value


async def _aiter(rows: Iterable[Sequence[Value]]) -> AsyncIterator[Sequence[Value]]:
    for row in rows:
        yield row


async def encode_summary(
    rows: Sequence[SummaryRow], fmt: SummaryFormat, *, group_by: str
) -> AsyncIterator[bytes]:
    columns = [group_by, *counters_row(Counters())]
    values = [tuple(row.values()) for row in summary_rows(rows, group_by=group_by)]
    async for chunk in encode_rows(_aiter(values), fmt, columns=columns):
        yield chunk
