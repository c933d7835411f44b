"""The archive as the release before the export columns wrote it: its tables and its insert, verbatim, so
that the tests can upgrade a real one. Fed from the cost streams in Redis (entry ids and JSON as they are)."""

from __future__ import annotations

import psycopg
import redis.asyncio as aioredis

from gateway.ledger.keys import LedgerKeys
from gateway.ledger.reply import text

_COUNTER_COLUMNS = (
    "requests", "cost_nanos", "saving_nanos", "input_tokens", "cached_tokens", "output_tokens",
    "reasoning_tokens",
)  # fmt: skip
SCHEMA = f"""
CREATE TABLE IF NOT EXISTS ledger_events (
    month date NOT NULL,
    tenant text COLLATE "C" NOT NULL,
    id text NOT NULL,
    time_ms bigint NOT NULL,
    stream_id text COLLATE "C" NOT NULL,
    key_id text NOT NULL,
    model text NOT NULL,
    provider text NOT NULL,
    action text NOT NULL,
    cost_nanos bigint NOT NULL,
    counterfactual_nanos bigint NOT NULL,
    input_tokens bigint NOT NULL,
    cached_tokens bigint NOT NULL,
    output_tokens bigint NOT NULL,
    reasoning_tokens bigint NOT NULL,
    event json NOT NULL,
    PRIMARY KEY (month, tenant, id)
) PARTITION BY RANGE (month);
CREATE INDEX IF NOT EXISTS ledger_events_in_time ON ledger_events (tenant, time_ms, stream_id);
CREATE TABLE IF NOT EXISTS ledger_daily (
    tenant text COLLATE "C" NOT NULL,
    day date NOT NULL,
    model text NOT NULL,
    {", ".join(f"{name} bigint NOT NULL" for name in _COUNTER_COLUMNS)},
    PRIMARY KEY (tenant, day, model)
);
CREATE TABLE IF NOT EXISTS ledger_tenants (tenant text COLLATE "C" PRIMARY KEY);
CREATE TEMPORARY TABLE IF NOT EXISTS ledger_stage (stream_id text, event text) ON COMMIT DELETE ROWS;
"""
_INTEGER_FIELDS = (
    "time_ms", "cost_nanos", "counterfactual_nanos", "input_tokens", "cached_tokens", "output_tokens",
    "reasoning_tokens",
)  # fmt: skip
_RECORD = ", ".join(
    [*(f"{name} text" for name in ("id", "tenant", "key_id", "model", "provider", "action")),
     *(f"{name} bigint" for name in _INTEGER_FIELDS)]
)  # fmt: skip
_SUMS = (
    "count(*)", "sum(cost_nanos)", "sum(counterfactual_nanos - cost_nanos)", "sum(input_tokens)",
    "sum(cached_tokens)", "sum(output_tokens)", "sum(reasoning_tokens)",
)  # fmt: skip
INSERT = f"""
WITH added AS (
    INSERT INTO ledger_events (month, tenant, id, time_ms, stream_id, key_id, model, provider, action,
        cost_nanos, counterfactual_nanos, input_tokens, cached_tokens, output_tokens, reasoning_tokens, event)
    SELECT DATE '1970-01-01' + (r.time_ms / 86400000)::int
           - extract(day FROM DATE '1970-01-01' + (r.time_ms / 86400000)::int)::int + 1,
           r.tenant, r.id, r.time_ms, staged.stream_id, r.key_id, r.model, r.provider, r.action,
           {", ".join(f"coalesce(r.{name}, 0)" for name in _INTEGER_FIELDS[1:])}, staged.event::json
    FROM ledger_stage AS staged, json_to_record(staged.event::json) AS r({_RECORD})
    ON CONFLICT DO NOTHING
    RETURNING tenant, time_ms, model, cost_nanos, counterfactual_nanos, input_tokens, cached_tokens,
              output_tokens, reasoning_tokens
), rolled AS (
    INSERT INTO ledger_daily AS d (tenant, day, model, {", ".join(_COUNTER_COLUMNS)})
    SELECT tenant, DATE '1970-01-01' + (time_ms / 86400000)::int, model,
           {", ".join(f"{total}::bigint" for total in _SUMS)}
    FROM added GROUP BY 1, 2, 3
    ON CONFLICT (tenant, day, model) DO UPDATE SET
    {", ".join(f"{name} = d.{name} + excluded.{name}" for name in _COUNTER_COLUMNS)}
    RETURNING 1
), named AS (
    INSERT INTO ledger_tenants SELECT DISTINCT tenant FROM added ON CONFLICT DO NOTHING RETURNING 1
)
SELECT (SELECT count(*) FROM added)
"""


async def archive_as_before(
    redis: aioredis.Redis, url: str, keys: LedgerKeys, streams: list[tuple[str, str]]
) -> int:
    """Copy the cost streams of ``(tenant, month)`` into an archive with the previous release's tables
    and insert (creating them, and its month partitions); returns how many rows it inserted."""
    staged: list[tuple[str, str]] = []
    months: set[str] = set()
    for tenant, month in streams:
        for entry_id, fields in await redis.xrange(keys.stream(tenant, month)):
            staged.append((text(entry_id), text(fields[b"event"])))
            months.add(month)
    async with await psycopg.AsyncConnection.connect(url) as connection:
        await connection.execute(SCHEMA)
        for month in sorted(months):
            year, number = int(month[:4]), int(month[5:7])
            following = f"{year + number // 12:04d}-{number % 12 + 1:02d}-01"
            partition = f"ledger_events_{month.replace('-', '_')}"
            await connection.execute(
                f"CREATE TABLE IF NOT EXISTS {partition} PARTITION OF ledger_events"
                f" FOR VALUES FROM ('{month}-01') TO ('{following}')"
            )
        async with connection.cursor() as cursor:
            async with cursor.copy("COPY ledger_stage (stream_id, event) FROM STDIN") as copy:
                for row in staged:
                    await copy.write_row(row)
            await cursor.execute(INSERT)
            inserted = await cursor.fetchone()
        await connection.commit()
    assert inserted is not None
    return int(str(inserted[0]))
