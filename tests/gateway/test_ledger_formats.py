"""Export encodings: CSV, JSON and NDJSON from a stream of events, amounts as exact decimal strings."""

from __future__ import annotations

import csv
import io
from collections.abc import AsyncIterator, Sequence

import orjson
import pytest

from gateway.ledger.event import CostEvent
from gateway.ledger.formats import EVENT_COLUMNS, encode_events
from gateway.ledger.source import ExportFormat
from tests.gateway.test_ledger_event import make_event


async def stream(events: Sequence[CostEvent]) -> AsyncIterator[CostEvent]:
    for event in events:
        yield event


async def encoded(
    events: Sequence[CostEvent], fmt: ExportFormat, chunk_bytes: int = 64 * 1024
) -> list[bytes]:
    return [chunk async for chunk in encode_events(stream(events), fmt, chunk_bytes=chunk_bytes)]


@pytest.mark.anyio
@pytest.mark.parametrize("fmt", ["csv", "json", "ndjson"])
async def test_formats_carry_every_column_and_exact_amounts(fmt: ExportFormat) -> None:
    events = [make_event(n, cost_nanos=10**9 * n + 1, parent_id="p" if n else None) for n in range(3)]
    text = b"".join(await encoded(events, fmt)).decode()
    if fmt == "csv":
        rows: list[dict[str, object]] = list(csv.DictReader(io.StringIO(text)))
    elif fmt == "json":
        rows = orjson.loads(text)
    else:
        rows = [orjson.loads(line) for line in text.splitlines()]
    assert [list(row) for row in rows] == [list(EVENT_COLUMNS)] * 3
    assert [row["cost_usd"] for row in rows] == ["0.000000001", "1.000000001", "2.000000001"]
    assert rows[0]["time"] == "2026-11-30T12:00:00.000Z"
    assert rows[1]["stream"] in (False, "false")


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("fmt", "empty"), [("csv", ",".join(EVENT_COLUMNS) + "\r\n"), ("json", "[\n]\n"), ("ndjson", "")]
)
async def test_formats_of_an_empty_export_are_still_valid(fmt: ExportFormat, empty: str) -> None:
    assert b"".join(await encoded([], fmt)).decode() == empty


@pytest.mark.anyio
async def test_formats_stream_in_bounded_chunks() -> None:
    chunks = await encoded([make_event(n) for n in range(500)], "ndjson", chunk_bytes=4096)
    assert len(chunks) > 10
    assert (
        max(len(chunk) for chunk in chunks[:-1]) < 4096 + 1024
    )  # a chunk closes after the line that fills it


@pytest.mark.anyio
async def test_formats_csv_defuses_spreadsheet_formulas_but_not_amounts() -> None:
    event = make_event(1, requested_model="=HYPERLINK(1)", id="@id", cost_nanos=5, counterfactual_nanos=0)
    [row] = list(csv.DictReader(io.StringIO(b"".join(await encoded([event], "csv")).decode())))
    assert (row["requested_model"], row["id"]) == ("'=HYPERLINK(1)", "'@id")
    assert row["saving_usd"] == "-0.000000005"
