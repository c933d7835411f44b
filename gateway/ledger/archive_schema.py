"""The PostgreSQL archive's tables, made and brought up to date on first use.

``ledger_events`` holds one row per event, partitioned by the event's UTC month (one table per month,
created when the first event of that month arrives), keyed by ``(month, tenant, id)``: the same key Redis
dedups by. The columns finance and the dashboard filter on are plain columns, the whole event is ``event``
(``json``: Redis's text, kept as it is), and every other field an export writes is a column of its own
(``EXPORT_COLUMNS``), so that the server renders the export's rows itself (``gateway.ledger.export_sql``).
``ledger_daily`` holds the daily rollups per tenant and model, ``ledger_tenants`` the tenants with events.

Upgrading: an archive made before the export columns existed gets them added (``ALTER TABLE … ADD
COLUMN``: no default, so no row is rewritten). Its rows keep them empty, and so does a row whose event does
not fit them: ``plain`` is not true on either, and an export renders those rows from ``event``, in the
gateway, as it always did.

Tables live in the connection's schema (``search_path``; ``?options=-csearch_path%3Dname`` in the URL picks
another).
"""

from __future__ import annotations

from datetime import date

import psycopg
from psycopg.conninfo import make_conninfo

Connection = psycopg.AsyncConnection[tuple[object, ...]]
CONNECT_TIMEOUT_SECONDS = 5
MIGRATION_LOCK_TIMEOUT = "5s"
"""How long adding the export columns waits for running reads (it then fails, and is tried again)."""
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
EXPORT_COLUMNS: tuple[tuple[str, str], ...] = (
    ("requested_model", "text"),
    ("tier", "text"),
    ("estimated", "boolean"),
    ("parent_id", "text"),
    ("status", "bigint"),
    ("latency_ms", "bigint"),
    ("stream", "boolean"),
    ("client_request_id", "text"),
    ("counterfactual_cached_tokens", "bigint"),
    ("counterfactual_basis", "text"),
    ("cache_write_tokens", "bigint"),
    ("reason", "text"),
    ("tool_uses", "text"),
    ("tool_cost_nanos", "bigint"),
    ("input_cost_nanos", "bigint"),
    ("cached_input_cost_nanos", "bigint"),
    ("cache_write_cost_nanos", "bigint"),
    ("output_cost_nanos", "bigint"),
    ("conversation", "text"),
    ("band", "text"),
    ("tags", "json"),
    ("sorted_tags", "text"),
    ("plain", "boolean"),
)
"""The other fields an export writes, each with its default filled in (``status`` 200, ``estimated``
false…); the cost by unit is ``cost_parts`` in four columns (NULL for none); ``tags`` is the caller's tags
as the gateway's JSON writes them (``{"team":"search"}``) and ``sorted_tags`` the same with the keys
sorted (the CSV export's cell). ``plain``: true when these columns hold the event and none of its text
fields holds what an export quotes, escapes or defuses (``export_sql.plain_text``); the server renders
the export rows of those events only."""
STORED_COLUMNS = (*EVENT_COLUMNS, *(name for name, _ in EXPORT_COLUMNS))
"""Every column of ``ledger_events``, in order."""
COUNTER_COLUMNS = (
    "requests", "cost_nanos", "saving_nanos", "input_tokens", "cached_tokens", "output_tokens",
    "reasoning_tokens",
)  # fmt: skip

SCHEMA = f"""
CREATE TABLE IF NOT EXISTS ledger_events ({_COLUMN_TYPES},
    {", ".join(f"{name} {kind}" for name, kind in EXPORT_COLUMNS)},
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
_COLUMNS_OF_EVENTS = """
SELECT attname FROM pg_attribute
WHERE attrelid = to_regclass('ledger_events') AND attnum > 0 AND NOT attisdropped
"""


async def connect(url: str, *, autocommit: bool = False) -> Connection:
    """A connection to the archive (``connect_timeout`` 5 s unless the URL says otherwise)."""
    if "connect_timeout" not in url:
        url = make_conninfo(url, connect_timeout=CONNECT_TIMEOUT_SECONDS)
    return await psycopg.AsyncConnection.connect(url, autocommit=autocommit)


async def ensure_schema(connection: Connection) -> None:
    """Create the tables, or add the export columns to an archive made without them."""
    async with connection.transaction():
        await connection.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK,))
        await connection.execute(SCHEMA)
        present = await _columns(connection)
        missing = [(name, kind) for name, kind in EXPORT_COLUMNS if name not in present]
        if missing:  # the ALTER waits for running reads: within a bound, so that it never queues the others
            await connection.execute(f"SET LOCAL lock_timeout = '{MIGRATION_LOCK_TIMEOUT}'")
            await connection.execute(
                "ALTER TABLE ledger_events "
                + ", ".join(f"ADD COLUMN IF NOT EXISTS {name} {kind}" for name, kind in missing)
            )


async def has_export_columns(connection: Connection) -> bool:
    """Whether ``ledger_events`` has every export column (not before an upgraded drainer has run)."""
    return {name for name, _ in EXPORT_COLUMNS} <= await _columns(connection)


async def _columns(connection: Connection) -> set[str]:
    cursor = await connection.execute(_COLUMNS_OF_EVENTS)
    return {str(row[0]) for row in await cursor.fetchall()}


def partition_name(month: str) -> str:
    return f"ledger_events_{month.replace('-', '_')}"


def month_bounds(month: str) -> tuple[date, date]:
    year, number = int(month[:4]), int(month[5:7])
    return date(year, number, 1), date(year + number // 12, number % 12 + 1, 1)
