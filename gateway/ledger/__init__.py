"""The cost ledger: every upstream call's cost recorded once in Redis, exported for finance, and the
tenants' budgets enforced with reservations. HTTP routes live in ``gateway.ledger.routes``.

Writing: ``Ledger`` (``record(event)`` on the request path, batches in the background, spools when Redis
is down). Budgets: ``Budgets.reserve()`` before forwarding, settled by the request's cost event.
Reading: one interface, ``LedgerSource`` (``gateway.ledger.source``: tenants, events in time order, daily
counters, a tenant's usage, export files), answered by Redis (``LedgerReader``) or by the PostgreSQL archive
(``gateway.ledger.archive_reader.ArchiveReader``, whose exports PostgreSQL writes:
``gateway.ledger.archive_export``); ``ledger_source(config, redis)`` picks by the config.
Archiving: ``gateway.ledger.drainer.ArchiveDrainer`` copies the cost streams into the archive in the
background (only when ``ledger.archive`` is set; its modules load only then).
"""

from __future__ import annotations

from gateway.base.money import nanos_from_usd, usd
from gateway.config.schema.ledger import BudgetConfig, LedgerConfig
from gateway.ledger.budget import BudgetLookup, Budgets, KeyBudget, Reservation
from gateway.ledger.event import CostEvent
from gateway.ledger.keys import LedgerKeys
from gateway.ledger.period import Period
from gateway.ledger.reader import LedgerReader, TenantUsage
from gateway.ledger.source import LedgerSource
from gateway.ledger.sources import ledger_source
from gateway.ledger.writer import Ledger, LedgerStats

__all__ = [
    "BudgetConfig",
    "BudgetLookup",
    "Budgets",
    "CostEvent",
    "KeyBudget",
    "Ledger",
    "LedgerConfig",
    "LedgerKeys",
    "LedgerReader",
    "LedgerSource",
    "LedgerStats",
    "Period",
    "Reservation",
    "TenantUsage",
    "ledger_source",
    "nanos_from_usd",
    "usd",
]
