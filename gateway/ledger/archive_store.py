"""Writing a batch of cost events into the PostgreSQL archive (its tables: ``gateway.ledger.archive_schema``).

An event archived twice (a retry, a drain that resumed) is one row: rows are keyed by ``(month, tenant,
id)``, as Redis dedups them. One transaction inserts a batch and adds to the rollups exactly the rows it
inserted, so the rollups always equal the sums of the events.

The server takes each row's columns from the event's JSON (``json_to_record``: parsed once); the gateway
has checked the types of the fields it reads, and gives the tags in the two forms the exports write and
whether the event's text is plain (``gateway.ledger.archive_rows``).
"""

from __future__ import annotations

from collections.abc import Sequence

from gateway.ledger.archive_rows import (
    EXPORT_FLAGS,
    EXPORT_INTEGERS,
    INTEGER_FIELDS,
    OPTIONAL_TEXT,
    TEXT_FIELDS,
    Archived,
)
from gateway.ledger.archive_schema import (
    COUNTER_COLUMNS,
    EVENT_COLUMNS,
    EXPORT_COLUMNS,
    SCHEMA_LOCK,
    Connection,
    connect,
    ensure_schema,
    month_bounds,
    partition_name,
)

_STAGE = (
    "CREATE TEMPORARY TABLE IF NOT EXISTS ledger_stage"
    " (stream_id text, event json, fields json, tags json, sorted_tags text, plain boolean)"
    " ON COMMIT DELETE ROWS"
)
_COPY = "COPY ledger_stage (stream_id, event, fields, tags, sorted_tags, plain) FROM STDIN"
_PARTS = ("input_cost_nanos", "cached_input_cost_nanos", "cache_write_cost_nanos", "output_cost_nanos")
_RECORD = ", ".join(
    [
        *(f"{name} text" for name in (*TEXT_FIELDS, "requested_model", *OPTIONAL_TEXT)),
        *(f"{name} bigint" for name in (*INTEGER_FIELDS, *EXPORT_INTEGERS)),
        *(f"{name} boolean" for name in EXPORT_FLAGS),
        "cost_parts json",
    ]
)
"""The row of each staged event, taken from its JSON by the server (``json_to_record``: parsed once)."""
_EXPORTED = {
    "requested_model": "r.requested_model",
    **{name: f"r.{name}" for name in OPTIONAL_TEXT},
    **{name: f"coalesce(r.{name}, {default})" for name, default in EXPORT_INTEGERS.items()},
    **{name: f"coalesce(r.{name}, false)" for name in EXPORT_FLAGS},
    **{name: f"(r.cost_parts ->> {index})::bigint" for index, name in enumerate(_PARTS)},
    "tags": "staged.tags",
    "sorted_tags": "staged.sorted_tags",
    "plain": "staged.plain",
}
_EXTRACTED = ", ".join(
    [
        "DATE '1970-01-01' + (r.time_ms / 86400000)::int"
        " - extract(day FROM DATE '1970-01-01' + (r.time_ms / 86400000)::int)::int + 1",
        "r.tenant",
        "r.id",
        "r.time_ms",
        "staged.stream_id",
        "r.key_id",
        "r.model",
        "r.provider",
        "r.action",
        *(f"coalesce(r.{name}, 0)" for name in INTEGER_FIELDS[1:]),
        "staged.event",
        *(_EXPORTED[name] for name, _ in EXPORT_COLUMNS),
    ]
)
_SUMS = (
    "count(*)", "sum(cost_nanos)", "sum(counterfactual_nanos - cost_nanos)", "sum(input_tokens)",
    "sum(cached_tokens)", "sum(output_tokens)", "sum(reasoning_tokens)",
)  # fmt: skip
_INSERT = f"""
WITH added AS (
    INSERT INTO ledger_events ({", ".join([*EVENT_COLUMNS, *(name for name, _ in EXPORT_COLUMNS)])})
    SELECT {_EXTRACTED}
    FROM ledger_stage AS staged, json_to_record(coalesce(staged.fields, staged.event)) AS r({_RECORD})
    ON CONFLICT DO NOTHING
    RETURNING tenant, time_ms, model, cost_nanos, counterfactual_nanos, input_tokens, cached_tokens,
              output_tokens, reasoning_tokens
), rolled AS (
    INSERT INTO ledger_daily AS d (tenant, day, model, {", ".join(COUNTER_COLUMNS)})
    SELECT tenant, DATE '1970-01-01' + (time_ms / 86400000)::int, model,
           {", ".join(f"{total}::bigint" for total in _SUMS)}
    FROM added GROUP BY 1, 2, 3
    ON CONFLICT (tenant, day, model) DO UPDATE SET
    {", ".join(f"{name} = d.{name} + excluded.{name}" for name in COUNTER_COLUMNS)}
    RETURNING 1
), named AS (
    INSERT INTO ledger_tenants SELECT DISTINCT tenant FROM added ON CONFLICT DO NOTHING RETURNING 1
)
SELECT (SELECT count(*) FROM added), (SELECT count(*) FROM rolled), (SELECT count(*) FROM named)
"""


class ArchiveStore:
    """Writes batches of events into the archive over one connection (opened when first needed, and again
    after a failure). Not safe for concurrent use."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._connection: Connection | None = None
        self._months: set[str] = set()

    async def write(self, batch: Sequence[Archived]) -> int:
        """Insert the batch in one transaction (events already archived are left as they are) and add the
        new ones to the rollups; returns how many were new. Raises ``psycopg.Error`` when the archive
        cannot be written (nothing of the batch is then written)."""
        if not batch:
            return 0
        connection = await self._open()
        try:
            await self._partitions(connection, {item.month for item in batch})
            async with connection.transaction():
                async with connection.cursor() as cursor:
                    async with cursor.copy(_COPY) as copy:
                        for item in batch:
                            await copy.write_row(item.staged())
                    await cursor.execute(_INSERT)
                    counted = await cursor.fetchone()
        except BaseException:
            await self.close()
            raise
        assert counted is not None
        return int(str(counted[0]))

    async def close(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            await connection.close()

    async def _open(self) -> Connection:
        if self._connection is None or self._connection.closed:
            connection = await connect(self.url)
            try:
                await ensure_schema(connection)
                async with connection.transaction():
                    await connection.execute(_STAGE)
            except BaseException:
                await connection.close()
                raise
            self._connection = connection
        return self._connection

    async def _partitions(self, connection: Connection, months: set[str]) -> None:
        for month in sorted(months - self._months):
            first, following = month_bounds(month)
            async with connection.transaction():
                await connection.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK,))
                await connection.execute(
                    f"CREATE TABLE IF NOT EXISTS {partition_name(month)} PARTITION OF ledger_events "
                    f"FOR VALUES FROM ('{first.isoformat()}') TO ('{following.isoformat()}')"
                )
            self._months.add(month)
