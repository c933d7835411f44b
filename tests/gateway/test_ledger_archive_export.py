"""The archive's exports written by PostgreSQL, against a real PostgreSQL and a real Redis: every format
byte for byte what the same export from Redis writes, for events at every edge the formats have (cells a
spreadsheet would run, empty and missing values, unicode, quotes, commas and line breaks, tags, zero,
negative and tiny amounts, times on millisecond, day, month and year boundaries, every kind of event);
rows the server cannot render come back to the gateway; and an archive written by the previous release
exports the same before and after its upgrade."""

from __future__ import annotations

import csv
import io
import uuid
from typing import Any
from urllib.parse import quote

import orjson
import psycopg
import pytest
import redis.asyncio as aioredis

from gateway.config.schema.ledger import LedgerConfig
from gateway.ledger import archive_export, archive_schema
from gateway.ledger.archive_export import export_parameters, export_query
from gateway.ledger.archive_reader import ArchiveReader
from gateway.ledger.archive_schema import EXPORT_COLUMNS, connect, ensure_schema, has_export_columns
from gateway.ledger.archive_store import ArchiveStore
from gateway.ledger.drainer import ArchiveDrainer
from gateway.ledger.event import CostEvent
from gateway.ledger.export_sql import TEXT_COLUMNS, plain_text
from gateway.ledger.focus import Unit, _unit_price
from gateway.ledger.formats import FORMATS, csv_cells
from gateway.ledger.keys import LedgerKeys
from gateway.ledger.period import MS_PER_DAY, Period, month_of
from gateway.ledger.reader import LedgerReader
from gateway.ledger.source import ExportFormat, LedgerSource
from gateway.ledger.summary import GROUPS, summarize
from tests.gateway.archive_previous import SCHEMA as PREVIOUS_SCHEMA
from tests.gateway.archive_previous import archive_as_before
from tests.gateway.test_ledger_event import NOV_30_NOON, make_event
from tests.gateway.test_ledger_reader import store

DEC_1 = NOV_30_NOON + 12 * 3_600_000  # 2026-12-01T00:00:00Z
JAN_1 = DEC_1 + 31 * MS_PER_DAY  # 2027-01-01T00:00:00Z
EVERYTHING = Period(DEC_1 - 3 * MS_PER_DAY, JAN_1 + 3 * MS_PER_DAY)
PERIODS = [
    EVERYTHING,
    Period(DEC_1 - 1, JAN_1),  # from the last millisecond of November to the end of December
    Period(NOV_30_NOON + 1, DEC_1 + 1),  # a piece of a day at each end
]
ODD_TEXTS = [
    "=1+1", "+1", "-1", "-1.5", "-", "@here", "-x", "a,b", 'say "hi"', "two\nlines", "cr\rhere", "tab\there",
    "\tlead", "\rlead", "back\\slash", "é漢字😀", "\u2028\u2029", "", " spaced ", "x" * 300, "a;b=c", "0",
    "\x7f", "\x1funit", "'quoted'", "{}",
]  # fmt: skip
ODD_FIELDS = (
    "requested_model", "tier", "parent_id", "client_request_id", "counterfactual_basis", "reason",
    "tool_uses", "conversation", "band", "key_id", "model", "provider", "action", "id",
)  # fmt: skip
TOOL_USES = [
    "web_search=2", "web_search=2;code_interpreter=1", "web_search=0", "x=abc", "=5", "web_search=007",
    "Web Search=1", "web_search=123456789012345678", "code_interpreter=1;code_interpreter=2", ";", "",
]  # fmt: skip
TAGS: list[dict[str, str] | None] = [
    None,
    {},
    {"team": "search"},
    {"team": "search", "feature": "autocomplete", "app": "web"},
    {"Zeta": "1", "alpha": "2", "_x": "3", "1": "4", "Alpha": "5"},
    {"q": 'say "hi", ok', "u": "é漢字😀", "s": "back\\slash", "n": "two\nlines"},
    {"k": "gateway/x", "gateway": "y"},
]


def names() -> tuple[LedgerKeys, list[str]]:
    """Tenants whose names are themselves text an export quotes or defuses."""
    run = uuid.uuid4().hex[:10]
    return LedgerKeys(f"arch-x-{run}"), [f"{run}-plain", f'={run},"odd"', f"{run}-é漢"]


def plain_events(tenants: list[str]) -> list[CostEvent]:
    """Events whose text is plain, at every numeric, time and kind edge, of the tenants with plain names
    (and a few of the other)."""
    events: list[CostEvent] = []

    def add(**fields: Any) -> None:
        number = len(events)
        values: dict[str, Any] = {
            "tenant": tenants[number % 2 * 2],
            "time_ms": NOV_30_NOON + number * 61_001,
            "cost_parts": (400_000, 1_000, 0, 599_000 + number * 137),
            "counterfactual_basis": "forwarded",
        }
        events.append(make_event(number, **(values | fields)))

    for time_ms in (
        DEC_1 - MS_PER_DAY, DEC_1 - MS_PER_DAY + 999, DEC_1 - 1, DEC_1, DEC_1 + 1, DEC_1 + 999, DEC_1 + 1000,
        JAN_1 - 1, JAN_1, JAN_1 + 86_399_999,
    ):  # fmt: skip
        for latency in (0, 1, 999, 1_000, 86_400_000, -5):
            add(time_ms=time_ms, latency_ms=latency)
    for cost, counterfactual in ((0, 0), (1, 0), (-7, 3), (2**51, 2**50), (1_000_000_001, 999)):
        add(cost_nanos=cost, counterfactual_nanos=counterfactual, cost_parts=None)
        add(cost_nanos=cost, counterfactual_nanos=counterfactual, cost_parts=(cost, 0, 0, 0))
    for parts in ((0, 0, 0, 0), (-1, 2, -3, 4), (1, 1, 1, 1), (3, 0, 0, 0), (10**12 - 1, 1, 0, 0)):
        add(cost_nanos=sum(parts), cost_parts=parts)
    add(cost_nanos=10, cost_parts=(1, 2, 3, 5))  # not the units' sum: one row of tokens
    for nanos in (1, 3, 5, -1, -5):  # unit prices of ½, 1½, 2½ … 10⁻¹⁵ USD: ties, to the even one
        add(cost_nanos=nanos, cost_parts=(nanos, 0, 0, 0), input_tokens=2_000_000, cached_tokens=0)
    add(cost_nanos=2, cost_parts=(0, 0, 0, 2), output_tokens=3)  # 0.000000000666666666… a token
    for tokens in (0, 7_999, 8_000, 32_000, 250_000, 272_000, 999_999, 1_000_000, 5_000_000):
        add(input_tokens=tokens, cached_tokens=tokens // 3, output_tokens=tokens // 7)
    add(input_tokens=10, cached_tokens=50, cache_write_tokens=70)  # more cached than sent
    add(input_tokens=100, cached_tokens=20, cache_write_tokens=30, cost_parts=(5, 6, 7, 8), cost_nanos=26)
    add(input_tokens=0, cached_tokens=0, output_tokens=0, reasoning_tokens=0, cost_nanos=0, cost_parts=None)
    for uses in TOOL_USES:
        add(tool_uses=uses, tool_cost_nanos=5_000, cost_nanos=1_005_000 + len(events) * 137)
    add(tool_uses=None, tool_cost_nanos=7, cost_nanos=1_000_007 + len(events) * 137)
    for tags in TAGS:
        add(tags=tags)
    for action in ("forward", "compress", "retrieve", "reroute", "reject", "summary", "shadow", "embedding"):
        add(action=action, reason="warning_band" if action == "compress" else None, band="warning")
    add(action="cache_hit", input_tokens=0, cached_tokens=0, output_tokens=0, cost_nanos=0, cost_parts=None,
        counterfactual_basis="cache_hit", counterfactual_nanos=2_500)  # fmt: skip
    add(id=f"req-{len(events)}:summary:1", parent_id="req-0", counterfactual_nanos=0, action="summary")
    add(estimated=True, stream=True, status=499, client_request_id="client-7", conversation="c0ffee",
        tier=">272K", counterfactual_cached_tokens=12, retries=2, first_token_ms=9)  # fmt: skip
    add(tier="", band="over_cliff", reason="over the cliff", counterfactual_basis=None)
    add(status=0, latency_ms=2**40)
    for number in range(5):
        add(tenant=tenants[1], time_ms=DEC_1 + number * 17, tags=TAGS[number % len(TAGS)])
    return events


def odd_events(tenants: list[str]) -> list[CostEvent]:
    """Events with text an export must quote, escape or defuse, in every text field."""
    events: list[CostEvent] = []
    for text in ODD_TEXTS:
        for field in ODD_FIELDS:
            number = 10_000 + len(events)
            value = f"{text}{number}" if field == "id" else text
            if field in ("model", "provider", "action", "key_id", "requested_model") and not value:
                continue  # never empty
            events.append(
                make_event(
                    number,
                    tenant=tenants[number % len(tenants)],
                    time_ms=NOV_30_NOON + (number % 500) * 97_003,
                    cost_parts=(1, 2, 3, 4),
                    cost_nanos=10,
                    **{field: value},
                )
            )
    return events


async def exported(source: LedgerSource, tenants: list[str], period: Period, fmt: ExportFormat) -> bytes:
    return b"".join([chunk async for chunk in source.export(tenants, period, fmt)])


async def drained(redis: aioredis.Redis, url: str, keys: LedgerKeys, events: list[CostEvent]) -> None:
    """The events stored in Redis and drained into the archive (by a drainer whose clock reads January
    2027, so that it finds every stream of the events)."""
    await store(redis, events, keys=keys)
    config = LedgerConfig(key_prefix=keys.prefix, archive=url, archive_batch_size=64)
    clock = (JAN_1 + 10 * MS_PER_DAY) / 1000
    drainer = ArchiveDrainer(redis, ArchiveStore(url), config=config, keys=keys, clock=lambda: clock)
    try:
        await drainer.drain(discover=True)
    finally:
        await drainer.close()


async def rendered_rows(url: str, tenants: list[str], fmt: ExportFormat) -> tuple[int, int]:
    """How many of the export's events the server rendered, and how many it left to the gateway."""
    async with await connect(url) as connection:
        await connection.execute("SET enable_sort = off")
        cursor = await connection.execute(
            export_query(fmt, len(tenants), rendered=True), export_parameters(tenants, EVERYTHING)
        )
        rows = await cursor.fetchall()
    return sum(row[0] is not None for row in rows), sum(row[0] is None for row in rows)


async def assert_same_exports(
    redis_source: LedgerSource, archive: LedgerSource, tenants: list[str], periods: list[Period]
) -> None:
    for period in periods:
        for order in (tenants, tenants[::-1], tenants[1:2]):
            for fmt in FORMATS:
                from_redis = await exported(redis_source, order, period, fmt)
                from_archive = await exported(archive, order, period, fmt)
                assert from_archive.split(b"\n") == from_redis.split(b"\n"), (fmt, period, order)  # a diff
                assert from_archive == from_redis


@pytest.mark.anyio
async def test_every_export_of_the_archive_is_byte_for_byte_the_export_from_redis(
    redis_client: aioredis.Redis, archive_url: str
) -> None:
    keys, tenants = names()
    plain, odd = plain_events(tenants), odd_events(tenants)
    await drained(redis_client, archive_url, keys, [*plain, *odd])
    redis_source, archive = LedgerReader(redis_client, keys=keys), ArchiveReader(archive_url)
    assert len([e async for e in redis_source.merged_events(tenants, EVERYTHING)]) == len(plain) + len(odd)
    await assert_same_exports(redis_source, archive, tenants, PERIODS)
    for fmt in ("csv", "ndjson", "focus"):  # both ways of writing a row were taken
        by_server, by_gateway = await rendered_rows(archive_url, tenants, fmt)
        assert by_server >= len(plain) - len(TOOL_USES) - len(TAGS) - 5, fmt
        assert by_gateway >= len(odd) // 2, fmt


@pytest.mark.anyio
async def test_an_export_reads_in_small_pages_merges_groups_of_tenants_and_stops_cleanly_midway(
    redis_client: aioredis.Redis, archive_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pages of 7 rows and queries of 2 tenants each (merged by the gateway, ties in time included)."""
    monkeypatch.setattr(archive_export, "ROWS_PER_FETCH", 7)
    monkeypatch.setattr(archive_export, "GROUP_TENANTS", 2)
    keys, tenants = names()
    events = [*plain_events(tenants), *odd_events(tenants)[::13]]
    await drained(redis_client, archive_url, keys, events)
    redis_source, archive = LedgerReader(redis_client, keys=keys), ArchiveReader(archive_url)
    await assert_same_exports(redis_source, archive, tenants, PERIODS[:1])
    for fmt in FORMATS:
        chunks = archive.export(tenants, EVERYTHING, fmt)
        assert [await anext(chunks) for _ in range(3)]
        await chunks.aclose()
    assert await exported(archive, [], EVERYTHING, "json") == b"[\n]\n"
    nobody = [f"{tenants[0]}-none"]
    for fmt in FORMATS:
        assert await exported(archive, nobody, EVERYTHING, fmt) == await exported(
            redis_source, nobody, EVERYTHING, fmt
        )


@pytest.mark.anyio
async def test_the_next_page_is_asked_for_before_a_page_is_handed_on(archive_url: str) -> None:
    """The server works on the next page while the gateway joins this one: when a page comes out, the
    query for the next one is running."""
    size = archive_export.ROWS_PER_FETCH
    async with await connect(archive_url) as connection:
        cursor = connection.cursor(name="pages")
        await cursor.execute("SELECT n FROM generate_series(1, %s) AS n", (2 * size + 1,))
        pages = archive_export._pages(cursor)
        sizes = []
        async for page in pages:
            sizes.append(len(page))
            assert connection.pgconn.transaction_status == psycopg.pq.TransactionStatus.ACTIVE, sizes
    assert sizes == [size, size, 1]


@pytest.mark.anyio
async def test_an_export_is_the_same_whatever_the_sessions_date_style(
    redis_client: aioredis.Redis, archive_url: str
) -> None:
    """The server writes FOCUS times as a timestamp's text, which ``DateStyle`` shapes: the export sets
    it for its transaction, over a session (set by the connection) that prints dates another way."""
    keys, tenants = names()
    await drained(redis_client, archive_url, keys, plain_events(tenants))
    other_style = archive_url + quote(" -cDateStyle=SQL,DMY")
    async with await connect(other_style) as connection:
        cursor = await connection.execute("SELECT DATE '2026-12-01'::text")
        assert await cursor.fetchone() == ("01/12/2026",)
    redis_source, archive = LedgerReader(redis_client, keys=keys), ArchiveReader(other_style)
    await assert_same_exports(redis_source, archive, tenants, PERIODS[:1])


@pytest.mark.anyio
async def test_an_archive_of_the_previous_release_exports_the_same_before_and_after_its_upgrade(
    redis_client: aioredis.Redis, archive_url: str
) -> None:
    keys, tenants = names()
    before = [*plain_events(tenants)[::2], *odd_events(tenants)[::7]]
    await store(redis_client, before, keys=keys)
    streams = sorted({(event.tenant, month_of(event.time_ms)) for event in before})
    assert await archive_as_before(redis_client, archive_url, keys, streams) == len(before)
    redis_source, archive = LedgerReader(redis_client, keys=keys), ArchiveReader(archive_url)
    async with await connect(archive_url) as connection:
        assert not await has_export_columns(connection)
    await assert_same_exports(redis_source, archive, tenants, PERIODS[:1])

    after = [*plain_events(tenants)[1::2], *odd_events(tenants)[1::7]]
    after = [
        make_event(20_000 + n, **{**_fields(event), "id": f"new-{event.id}"}) for n, event in enumerate(after)
    ]
    await drained(redis_client, archive_url, keys, after)  # the upgraded drainer: adds the columns, reads all
    async with await connect(archive_url) as connection:
        assert await has_export_columns(connection)
        cursor = await connection.execute(
            "SELECT count(*) FILTER (WHERE plain), count(*) FILTER (WHERE plain IS NULL), count(*)"
            " FROM ledger_events"
        )
        counted = await cursor.fetchone()
    assert counted is not None
    plain, upgraded, total = counted
    assert (upgraded, total) == (len(before), len(before) + len(after))  # the old rows are left as they were
    assert plain == sum(plain_text(getattr(event, name) for name in TEXT_COLUMNS) for event in after) > 0
    await assert_same_exports(redis_source, archive, tenants, PERIODS)
    for group_by in GROUPS:
        expected = await summarize(redis_source, tenants=tenants, period=EVERYTHING, group_by=group_by)
        assert await summarize(archive, tenants=tenants, period=EVERYTHING, group_by=group_by) == expected


def _fields(event: CostEvent) -> dict[str, Any]:
    return {name: getattr(event, name) for name in CostEvent.__dataclass_fields__}


@pytest.mark.anyio
async def test_the_upgrade_adds_the_columns_once_and_waits_for_reads_only_so_long(
    archive_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(archive_schema, "MIGRATION_LOCK_TIMEOUT", "200ms")
    async with await psycopg.AsyncConnection.connect(archive_url, autocommit=True) as connection:
        await connection.execute(PREVIOUS_SCHEMA)
    async with await connect(archive_url) as reading, await connect(archive_url) as upgrading:
        await reading.execute("SELECT count(*) FROM ledger_events")  # holds its lock until it ends
        with pytest.raises(psycopg.errors.LockNotAvailable):
            await ensure_schema(upgrading)
        await reading.rollback()
        await ensure_schema(upgrading)
        await ensure_schema(upgrading)
        cursor = await upgrading.execute(
            "SELECT attname FROM pg_attribute WHERE attrelid = 'ledger_events'::regclass AND attnum > 0"
        )
        columns = [row[0] for row in await cursor.fetchall()]
    assert columns[-len(EXPORT_COLUMNS) :] == [name for name, _ in EXPORT_COLUMNS]


@pytest.mark.anyio
async def test_an_event_whose_fields_do_not_fit_the_columns_is_archived_and_exported_as_from_redis(
    redis_client: aioredis.Redis, archive_url: str
) -> None:
    keys, tenants = names()
    misfits = [
        make_event(1, tenant=tenants[0], reason="nul \x00 inside"),
        make_event(2, tenant=tenants[0], status="499"),
        make_event(3, tenant=tenants[0], estimated=1),
        make_event(4, tenant=tenants[0], latency_ms=2**63),
        make_event(5, tenant=tenants[0], tier=7),
        make_event(6, tenant=tenants[0], conversation="c\x00"),
        make_event(7, tenant=tenants[0]),
    ]
    await drained(redis_client, archive_url, keys, misfits)
    redis_source, archive = LedgerReader(redis_client, keys=keys), ArchiveReader(archive_url)
    for fmt in ("csv", "json", "ndjson"):
        assert await exported(archive, tenants[:1], EVERYTHING, fmt) == await exported(
            redis_source, tenants[:1], EVERYTHING, fmt
        )
    assert await rendered_rows(archive_url, tenants[:1], "csv") == (1, len(misfits) - 1)


def test_text_called_plain_is_written_unchanged_by_every_format() -> None:
    """What the server writes as it is, the gateway writes unchanged too: a plain text is its own CSV cell
    (no quotes, no defusing) and its own JSON string's content (no escape)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\r\n")
    chars = [chr(code) for code in range(1, 0x3000)] + ["\ufeff", "\uffff", "😀", "\U0010ffff"]
    for text in (form for char in chars for form in (char, f"a{char}b", f"{char}b")):
        if not plain_text([text]):
            continue
        buffer.seek(0)
        buffer.truncate()
        writer.writerow(csv_cells([text, "x"]))
        assert buffer.getvalue() == f"{text},x\r\n", repr(text)
        assert orjson.dumps(text).decode() == f'"{text}"', repr(text)


def test_plain_text_refuses_what_a_format_changes() -> None:
    for text in ("=1", "+1", "-1", "@a", "a,b", 'a"b', "a\\b", "a\nb", "a\rb", "\ta", "a\x00b", "a\x1fb"):
        assert not plain_text([text]), text
    assert plain_text(["a-b", "a=b", "é漢字😀", "", None, "a b", "a;b"])
    assert plain_text([]) and plain_text([None, ""])
    assert not plain_text(["fine", 5])
    assert not plain_text(["fine", "=x"]) and not plain_text(["", "-x"]) and not plain_text(["a", "b\x00"])


def test_unit_prices_are_exact_and_round_half_to_even() -> None:
    from decimal import Context, Decimal

    exact = Context(prec=100)
    for nanos, quantity in [(1, 2_000_000), (3, 2_000_000), (5, 2_000_000), (2, 3), (-1, 2_000_000), (7, 1),
                            (10**12, 7), (-(10**12), 3), (0, 5), (123_456_789, 1_000_003)]:  # fmt: skip
        price = _unit_price(Unit("Output Tokens", "Tokens", quantity, nanos))
        value = exact.divide(Decimal(nanos), Decimal(10**9 * quantity)).quantize(
            Decimal("1e-15"), context=exact
        )
        assert price == (format(value.normalize(), "f") if value else "0"), (nanos, quantity)
    assert _unit_price(Unit("Output Tokens", "Tokens", 0, 5)) is None
    assert _unit_price(Unit("Input Tokens", "Tokens", 2_000_000, 1)) == "0"  # a tie, to the even 0
    assert _unit_price(Unit("Input Tokens", "Tokens", 2_000_000, 3)) == "0.000000000000002"
