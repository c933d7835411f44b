"""Which ``LedgerSource`` reads the ledger: the PostgreSQL archive when ``ledger.archive`` is set, Redis
otherwise. The archive's modules (and its client library) load only when an archive is configured."""

from __future__ import annotations

from redis.asyncio import Redis

from gateway.config.schema.ledger import LedgerConfig
from gateway.ledger.budget import BudgetLookup
from gateway.ledger.keys import LedgerKeys
from gateway.ledger.reader import LedgerReader
from gateway.ledger.source import LedgerSource


def ledger_source(
    config: LedgerConfig,
    redis: Redis | None,
    *,
    keys: LedgerKeys | None = None,
    budget_of: BudgetLookup | None = None,
    archive: str | None = None,
) -> LedgerSource:
    """The archive at ``archive`` (else ``config.archive``) when there is one, reading a tenant's live
    usage from ``redis``; else Redis. Without an archive, ``redis`` is required."""
    live = None
    if redis is not None:
        live = LedgerReader(redis, keys=keys or LedgerKeys(config.key_prefix), budget_of=budget_of)
    url = archive or config.archive
    if url is not None:
        from gateway.ledger.archive_reader import ArchiveReader

        return ArchiveReader(url, live=live)
    if live is None:
        raise ValueError("without an archive the ledger is read from Redis: give a Redis client")
    return live
