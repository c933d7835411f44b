"""The PostgreSQL archive against a real PostgreSQL and a real Redis: the drainer copies the cost streams
exactly once, the archive answers every reader as Redis does (to the nano-dollar, in the same order),
a drain resumes where it stopped, and Redis is trimmed only of what the archive has."""

from __future__ import annotations

import asyncio
import uuid

import psycopg
import pytest
import redis.asyncio as aioredis
from pydantic import ValidationError

from gateway.cli import main
from gateway.config.schema.ledger import LedgerConfig
from gateway.ledger import archive_reader
from gateway.ledger.archive_reader import ArchiveReader
from gateway.ledger.archive_store import ArchiveStore
from gateway.ledger.drainer import GROUP, ArchiveDrainer
from gateway.ledger.event import CostEvent
from gateway.ledger.formats import FORMATS
from gateway.ledger.keys import LedgerKeys
from gateway.ledger.period import MS_PER_DAY, Period, day_of, month_of
from gateway.ledger.reader import LedgerReader
from gateway.ledger.source import ExportFormat, LedgerSource
from gateway.ledger.sources import ledger_source
from gateway.ledger.summary import GROUPS, summarize
from tests.gateway.test_ledger_event import NOV_30_NOON, make_event
from tests.gateway.test_ledger_reader import store
from tests.ports import free_port

HOUR = 3_600_000
OCT_31 = NOV_30_NOON - 30 * MS_PER_DAY
DEC_20 = NOV_30_NOON + 20 * MS_PER_DAY


def recorded(tenants: list[str]) -> list[CostEvent]:
    """Events over a month boundary and many days, several models, ties in time across tenants, side
    calls, tool uses and events without cost parts."""
    events = []
    for number in range(240):
        tenant = tenants[number % len(tenants)]
        time_ms = OCT_31 + number * 3 * HOUR + (number % 4) * 17 - (number % len(tenants)) * 17
        extra: dict[str, object] = {
            "tenant": tenant,
            "time_ms": time_ms,
            "model": ["a", "b:x", "c"][number % 3],
        }
        if number % 5 == 0:
            extra |= {
                "id": f"req-{number}:summary:1",
                "parent_id": f"req-{number}",
                "counterfactual_nanos": 0,
            }
        if number % 7 == 0:
            extra |= {"tool_uses": "web_search=2", "tool_cost_nanos": 20_000_000, "cost_nanos": 21_000_000}
        if number % 2 == 0:
            extra["cost_parts"] = (1, 2, 3, int(str(extra.get("cost_nanos", 1_000_000 + number * 137))) - 6)
        events.append(make_event(number, **extra))
    for number in range(240, 252):  # one millisecond: ties within a tenant and across tenants
        events.append(make_event(number, tenant=tenants[number % len(tenants)], time_ms=NOV_30_NOON + 1))
    return events


def names() -> tuple[LedgerKeys, list[str]]:
    run = uuid.uuid4().hex[:10]
    return LedgerKeys(f"arch-{run}"), [f"{run}-{letter}" for letter in "abc"]


def drainer_of(redis: aioredis.Redis, url: str, keys: LedgerKeys, **config: object) -> ArchiveDrainer:
    settings = LedgerConfig(key_prefix=keys.prefix, archive=url, archive_batch_size=64, **config)  # type: ignore[arg-type]
    return ArchiveDrainer(redis, ArchiveStore(url), config=settings, keys=keys, clock=lambda: DEC_20 / 1000)


async def everything(source: LedgerSource, tenants: list[str], period: Period) -> list[CostEvent]:
    return [event async for event in source.merged_events(tenants, period)]


async def exported(source: LedgerSource, tenants: list[str], period: Period, fmt: ExportFormat) -> bytes:
    return b"".join([chunk async for chunk in source.export(tenants, period, fmt)])


PERIODS = [
    Period(OCT_31 - MS_PER_DAY, DEC_20),  # whole days over the month boundary
    Period(OCT_31 + 5 * HOUR + 123, NOV_30_NOON - 7 * HOUR + 5),  # pieces of a day at both ends
    Period(
        NOV_30_NOON - 30 * MS_PER_DAY + 2 * HOUR, NOV_30_NOON - 30 * MS_PER_DAY + 9 * HOUR
    ),  # within a day
]


@pytest.mark.anyio
async def test_the_archive_answers_every_reader_as_redis_does(
    redis_client: aioredis.Redis, archive_url: str
) -> None:
    keys, tenants = names()
    events = recorded(tenants)
    await store(redis_client, events, keys=keys)
    await store(redis_client, events[::9], keys=keys)  # replayed: Redis counts them once
    drainer = drainer_of(redis_client, archive_url, keys)
    try:
        assert await drainer.drain(discover=True) == len(events)
    finally:
        await drainer.close()
    redis_source = LedgerReader(redis_client, keys=keys)
    archive = ArchiveReader(archive_url)
    assert await archive.tenants() == await redis_source.tenants() == sorted(tenants)
    for period in PERIODS:
        from_redis = await everything(redis_source, tenants, period)
        assert from_redis, period
        assert await everything(archive, tenants, period) == from_redis
        assert await everything(archive, tenants[::-1], period) == await everything(
            redis_source, tenants[::-1], period
        )
        for group_by in GROUPS:
            expected = await summarize(redis_source, tenants=tenants, period=period, group_by=group_by)
            assert await summarize(archive, tenants=tenants, period=period, group_by=group_by) == expected
        for fmt in FORMATS:
            assert await exported(archive, tenants, period, fmt) == await exported(
                redis_source, tenants, period, fmt
            )
    one = tenants[1]
    assert [e async for e in archive.events(one, PERIODS[0])] == [
        e async for e in redis_source.events(one, PERIODS[0])
    ]


@pytest.mark.anyio
async def test_the_archive_reads_page_after_page_and_stops_cleanly_midway(
    redis_client: aioredis.Redis, archive_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Small pages: each next one is asked for while the last is parsed, over many page boundaries; a
    reader that stops early leaves no fetch running and the next export reads it all."""
    monkeypatch.setattr(archive_reader, "ROWS_PER_FETCH", 7)
    keys, tenants = names()
    await store(redis_client, recorded(tenants), keys=keys)
    drainer = drainer_of(redis_client, archive_url, keys)
    try:
        await drainer.drain(discover=True)
    finally:
        await drainer.close()
    archive, period = ArchiveReader(archive_url), PERIODS[0]
    expected = await everything(LedgerReader(redis_client, keys=keys), tenants, period)
    assert await everything(archive, tenants, period) == expected
    for stop_after in (1, 7, 30):
        events = archive.merged_events(tenants, period)
        assert [await anext(events) for _ in range(stop_after)] == expected[:stop_after]
        await events.aclose()
    assert await everything(archive, tenants[:1], period) == [e for e in expected if e.tenant == tenants[0]]


@pytest.mark.anyio
async def test_rollups_equal_the_sums_of_the_archived_events(
    redis_client: aioredis.Redis, archive_url: str
) -> None:
    keys, tenants = names()
    events = recorded(tenants)
    await store(redis_client, events, keys=keys)
    drainer = drainer_of(redis_client, archive_url, keys)
    try:
        await drainer.drain(discover=True)
    finally:
        await drainer.close()
    async with await psycopg.AsyncConnection.connect(archive_url) as connection:
        cursor = await connection.execute(
            "SELECT tenant, day::text, model, requests, cost_nanos, saving_nanos, input_tokens, output_tokens"
            " FROM ledger_daily ORDER BY 1, 2, 3"
        )
        rollups = await cursor.fetchall()
    expected: dict[tuple[str, str, str], list[int]] = {}
    for event in events:
        sums = expected.setdefault((event.tenant, day_of(event.time_ms), event.model), [0] * 5)
        for index, value in enumerate(
            (1, event.cost_nanos, event.saving_nanos, event.input_tokens, event.output_tokens)
        ):
            sums[index] += value
    assert [(*row[:3], list(row[3:])) for row in rollups] == [
        (*key, expected[key]) for key in sorted(expected)
    ]


@pytest.mark.anyio
async def test_a_drain_read_again_archives_nothing_twice(
    redis_client: aioredis.Redis, archive_url: str
) -> None:
    keys, tenants = names()
    events = recorded(tenants)
    await store(redis_client, events, keys=keys)
    drainer = drainer_of(redis_client, archive_url, keys)
    try:
        await drainer.drain(discover=True)
        for tenant in tenants:
            for month in ("2026-10", "2026-11"):
                await redis_client.xgroup_setid(keys.stream(tenant, month), GROUP, "0")  # all delivered again
        assert await drainer.drain() == len(events)
        assert (drainer.stats().archived, drainer.stats().duplicates) == (len(events), len(events))
    finally:
        await drainer.close()
    redis_source, archive = LedgerReader(redis_client, keys=keys), ArchiveReader(archive_url)
    period = PERIODS[0]
    assert await everything(archive, tenants, period) == await everything(redis_source, tenants, period)
    for group_by in GROUPS:
        expected = await summarize(redis_source, tenants=tenants, period=period, group_by=group_by)
        assert await summarize(archive, tenants=tenants, period=period, group_by=group_by) == expected


@pytest.mark.anyio
async def test_a_drain_stopped_by_a_dead_archive_resumes_its_pending_entries(
    redis_client: aioredis.Redis, archive_url: str
) -> None:
    keys, tenants = names()
    events = recorded(tenants)
    await store(redis_client, events, keys=keys)
    dead = drainer_of(redis_client, f"postgresql://postgres@127.0.0.1:{free_port()}/none", keys)
    with pytest.raises(psycopg.OperationalError):
        await dead.drain(discover=True)  # read a batch, could not archive it: nothing acknowledged
    await dead.close()
    pending = await redis_client.xpending(keys.stream(tenants[0], "2026-10"), GROUP)
    assert pending["pending"] > 0
    drainer = drainer_of(redis_client, archive_url, keys)
    try:
        assert await drainer.drain(discover=True) == len(events)
        assert drainer.stats().archived == len(events)
    finally:
        await drainer.close()
    for tenant in tenants:
        for month in ("2026-10", "2026-11"):
            assert (await redis_client.xpending(keys.stream(tenant, month), GROUP))["pending"] == 0
    redis_source, archive = LedgerReader(redis_client, keys=keys), ArchiveReader(archive_url)
    assert await everything(archive, tenants, PERIODS[0]) == await everything(
        redis_source, tenants, PERIODS[0]
    )


@pytest.mark.anyio
async def test_redis_is_trimmed_only_of_what_the_archive_has(
    redis_client: aioredis.Redis, archive_url: str
) -> None:
    keys, tenants = names()
    events = recorded(tenants)
    await store(redis_client, events, keys=keys)
    drainer = drainer_of(redis_client, archive_url, keys, redis_keep_days=25)  # keeps from Nov 25 on
    cutoff = DEC_20 - 25 * MS_PER_DAY
    everywhere = Period(OCT_31 - MS_PER_DAY, DEC_20)
    redis_source, archive = LedgerReader(redis_client, keys=keys), ArchiveReader(archive_url)
    before = await everything(redis_source, tenants, everywhere)
    try:
        await drainer.discover()
        assert await drainer.trim() == 0  # nothing archived yet: nothing trimmed
        await drainer.drain()
        late = make_event(999, tenant=tenants[0], time_ms=OCT_31 + HOUR)  # old, written after the drain
        await store(redis_client, [late], keys=keys)
        old = [event for event in events if event.time_ms < cutoff]
        assert await drainer.trim() == len(old)
        # what stays is listed as before the trim, the late one at its time (ties within a millisecond
        # keep the order the ledger gave them, which is not the order they were written in)
        kept = [event for event in before if event.time_ms >= cutoff]
        assert [e.time_ms for e in kept] == sorted(e.time_ms for e in events if e.time_ms >= cutoff)
        listed = await everything(redis_source, tenants, everywhere)
        assert listed == sorted([*kept, late], key=lambda e: e.time_ms)
        assert await everything(archive, tenants, everywhere) == [e for e in before]
        await drainer.drain()
        assert await drainer.trim() == 1
    finally:
        await drainer.close()
    assert len(await everything(archive, tenants, everywhere)) == len(events) + 1
    summary = await summarize(archive, tenants=tenants, period=everywhere, group_by="tenant")
    assert summary == await summarize(redis_source, tenants=tenants, period=everywhere, group_by="tenant")


@pytest.mark.anyio
async def test_one_drainer_leads_and_another_takes_over(
    redis_client: aioredis.Redis, archive_url: str
) -> None:
    keys, _ = names()
    first, second = drainer_of(redis_client, archive_url, keys), drainer_of(redis_client, archive_url, keys)
    assert await first.lead()
    assert not await second.lead()
    assert await first.lead()  # renewed
    await first.close()  # gives the lease up
    assert await second.lead()
    await second.close()


def test_the_archive_is_a_postgresql_url() -> None:
    assert LedgerConfig(archive="postgresql://ledger@db:5432/gateway").archive is not None
    with pytest.raises(ValidationError, match="archive"):
        LedgerConfig(archive="mysql://db/ledger")


@pytest.mark.anyio
async def test_without_an_archive_the_ledger_is_read_from_redis(redis_client: aioredis.Redis) -> None:
    assert isinstance(ledger_source(LedgerConfig(), redis_client), LedgerReader)
    picked = ledger_source(LedgerConfig(archive="postgresql://db/ledger"), redis_client)
    assert isinstance(picked, ArchiveReader)


def test_costs_commands_read_the_archive_as_they_read_redis(
    redis_url: str, archive_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    keys, tenants = names()
    events = recorded(tenants)

    async def fill_and_drain() -> None:
        client = aioredis.Redis.from_url(redis_url)
        drainer = drainer_of(client, archive_url, keys)
        try:
            await store(client, events, keys=keys)
            await drainer.drain(discover=True)
        finally:
            await drainer.close()
            await client.aclose()

    asyncio.run(fill_and_drain())
    period = ["--from", "2026-10-30", "--to", "2026-12-01T05:00:00Z"]
    answers = {}
    for source in (["--redis-url", redis_url, "--key-prefix", keys.prefix], ["--archive", archive_url]):
        for command in (
            ["summary", "--format", "json", "--group-by", "model"],
            ["export", "--format", "focus"],
        ):
            assert main(["costs", *command, *period, *source]) == 0
            answers.setdefault(command[0], []).append(capsys.readouterr().out)
    assert answers["summary"][0] == answers["summary"][1]
    assert answers["export"][0] == answers["export"][1]
    assert answers["export"][0].count("\n") > len(events)  # every event, at least one FOCUS row each
    dead = f"postgresql://postgres@127.0.0.1:{free_port()}/none"
    assert main(["costs", "summary", "--archive", dead]) == 1
    assert "the ledger archive cannot be reached" in capsys.readouterr().err


@pytest.mark.anyio
async def test_an_entry_that_is_no_cost_event_is_set_aside_and_the_rest_archived(
    redis_client: aioredis.Redis, archive_url: str
) -> None:
    keys, tenants = names()
    events = recorded(tenants[:1])[:20]
    await store(redis_client, events[:10], keys=keys)
    stream = keys.stream(tenants[0], month_of(events[0].time_ms))
    for foreign in (
        b"not json",
        b'{"id": "x", "tenant": "t"}',
        events[0].to_json().replace(b'"time_ms":', b'"x":'),
    ):
        await redis_client.xadd(stream, {"id": "foreign", "event": foreign})
    await store(redis_client, events[10:], keys=keys)
    drainer = drainer_of(redis_client, archive_url, keys)
    try:
        assert await drainer.drain(discover=True) == len(events)
        assert (drainer.stats().archived, drainer.stats().rejected) == (len(events), 3)
    finally:
        await drainer.close()
    assert (await redis_client.xpending(stream, GROUP))["pending"] == 0
    archived = await everything(ArchiveReader(archive_url), tenants[:1], PERIODS[0])
    assert archived == await everything(LedgerReader(redis_client, keys=keys), tenants[:1], PERIODS[0])
