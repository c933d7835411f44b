"""The PostgreSQL archive of the ledger: its tables, and writing a batch of cost events into it.

``ledger_events`` holds one row per event, partitioned by the event's UTC month (one table per month,
created when the first event of that month arrives), keyed by ``(month, tenant, id)``: the same key Redis
dedups by, so an event archived twice (a retry, a drain that resumed) is one row. The columns finance and
the dashboard filter on are plain columns; the whole event is ``event`` (jsonb), which is what readers
return. ``ledger_daily`` holds the daily rollups per tenant and model (the figures of Redis's daily
counter hashes), ``ledger_tenants`` the tenants with events. One transaction inserts a batch and adds to
the rollups exactly the rows it inserted, so the rollups always equal the sums of the events.

Tables live in the connection's schema (``search_path``; ``?options=-csearch_path%3Dname`` in the URL picks
another), and are created on first use.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date

import psycopg
from psycopg.conninfo import make_conninfo

from gateway.ledger.period import month_of

Connection = psycopg.AsyncConnection[tuple[object, ...]]
CONNECT_TIMEOUT_SECONDS = 5
LAST_MS = 253_402_300_800_000  # 10000-01-01T00:00:00Z
SCHEMA_LOCK = 0x6C656467  # one advisory lock: two processes never create the same table at once

EVENT_COLUMNS = (
    "month", "tenant", "id", "time_ms", "stream_id", "key_id", "model", "provider", "action",
    "cost_nanos", "counterfactual_nanos", "input_tokens", "cached_tokens", "output_tokens",
    "reasoning_tokens", "event",
)  # fmt: skip
_COLUMN_TYPES = """
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
    event json NOT NULL"""
COUNTER_COLUMNS = (
    "requests", "cost_nanos", "saving_nanos", "input_tokens", "cached_tokens", "output_tokens",
    "reasoning_tokens",
)  # fmt: skip

SCHEMA = f"""
CREATE TABLE IF NOT EXISTS ledger_events ({_COLUMN_TYPES},
    PRIMARY KEY (month, tenant, id)
) PARTITION BY RANGE (month);
CREATE INDEX IF NOT EXISTS ledger_events_in_time ON ledger_events (tenant, time_ms, stream_id);
CREATE TABLE IF NOT EXISTS ledger_daily (
    tenant text COLLATE "C" NOT NULL,
    day date NOT NULL,
    model text NOT NULL,
    {", ".join(f"{name} bigint NOT NULL" for name in COUNTER_COLUMNS)},
    PRIMARY KEY (tenant, day, model)
);
CREATE TABLE IF NOT EXISTS ledger_tenants (tenant text COLLATE "C" PRIMARY KEY);
"""

_STAGE = (
    "CREATE TEMPORARY TABLE IF NOT EXISTS ledger_stage (stream_id text, event text) ON COMMIT DELETE ROWS"
)
_COPY = "COPY ledger_stage (stream_id, event) FROM STDIN"
_INTEGER_FIELDS = (
    "time_ms", "cost_nanos", "counterfactual_nanos", "input_tokens", "cached_tokens", "output_tokens",
    "reasoning_tokens",
)  # fmt: skip
_TEXT_FIELDS = ("id", "tenant", "key_id", "requested_model", "model", "provider", "action")
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
        *(f"coalesce(r.{name}, 0)" for name in _INTEGER_FIELDS[1:]),
        "staged.event::json",
    ]
)
_RECORD = ", ".join(
    [*(f"{name} text" for name in ("id", "tenant", "key_id", "model", "provider", "action")),
     *(f"{name} bigint" for name in _INTEGER_FIELDS)]
)  # fmt: skip
"""The row of each staged event, taken from its JSON by the server (``json_to_record``: parsed once)."""
_SUMS = (
    "count(*)", "sum(cost_nanos)", "sum(counterfactual_nanos - cost_nanos)", "sum(input_tokens)",
    "sum(cached_tokens)", "sum(output_tokens)", "sum(reasoning_tokens)",
)  # fmt: skip
_INSERT = f"""
WITH added AS (
    INSERT INTO ledger_events ({", ".join(EVENT_COLUMNS)})
    SELECT {_EXTRACTED} FROM ledger_stage AS staged, json_to_record(staged.event::json) AS r({_RECORD})
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


@dataclass(frozen=True, slots=True)
class Archived:
    """One event to archive: where Redis holds it (its stream entry id orders ties), its UTC month, and its
    JSON as Redis holds it (``archivable`` checked it)."""

    stream_id: str
    month: str
    raw: str


def archivable(loaded: object) -> str:
    """The month of a parsed cost event that the archive can take (the checks ``CostEvent`` makes, and the
    types the server's extraction needs); raises ``ValueError`` for anything else."""
    if type(loaded) is not dict:
        raise ValueError("a cost event is a JSON object")
    for name in _TEXT_FIELDS:
        if type(loaded.get(name)) is not str:
            raise ValueError(f"a cost event's {name} is text")
    if not loaded["id"] or not loaded["tenant"]:
        raise ValueError("a cost event needs an id and a tenant")
    for name in _INTEGER_FIELDS:
        value = loaded.get(name, 0)
        if type(value) is not int or not -(2**63) <= value < 2**63:
            raise ValueError(f"a cost event's {name} is an integer")
    if type(loaded.get("tool_cost_nanos", 0)) is not int:
        raise ValueError("money in a cost event is integer nano-dollars")
    parts = loaded.get("cost_parts")
    if parts is not None:
        if type(parts) is not list or len(parts) != 4 or any(type(part) is not int for part in parts):
            raise ValueError("cost_parts is a list of four integer nano-dollar amounts")
    time_ms = loaded.get("time_ms")
    if type(time_ms) is not int or not 0 <= time_ms < LAST_MS:
        raise ValueError("a cost event's time is between 1970 and 9999")
    return month_of(time_ms)


async def connect(url: str, *, autocommit: bool = False) -> Connection:
    """A connection to the archive (``connect_timeout`` 5 s unless the URL says otherwise)."""
    if "connect_timeout" not in url:
        url = make_conninfo(url, connect_timeout=CONNECT_TIMEOUT_SECONDS)
    return await psycopg.AsyncConnection.connect(url, autocommit=autocommit)


async def ensure_schema(connection: Connection) -> None:
    async with connection.transaction():
        await connection.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK,))
        await connection.execute(SCHEMA)


def partition_name(month: str) -> str:
    return f"ledger_events_{month.replace('-', '_')}"


def month_bounds(month: str) -> tuple[date, date]:
    year, number = int(month[:4]), int(month[5:7])
    return date(year, number, 1), date(year + number // 12, number % 12 + 1, 1)


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
                            await copy.write_row((item.stream_id, item.raw))
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
