"""What the page shows, gathered by ``routes`` before ``page`` and ``sections`` write it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gateway.dashboard.figures import Burn, Scan, Stack
from gateway.dashboard.periods import Chosen
from gateway.ledger.summary import Counters, SummaryRow


@dataclass(frozen=True, slots=True)
class ReportLink:
    label: str
    href: str


@dataclass(frozen=True, slots=True)
class View:
    chosen: Chosen
    basis: str
    tenant: str | None
    model: str | None
    stack: Stack
    tenants: Sequence[str]
    models: Sequence[str]
    total: Counters
    by_tenant: Sequence[SummaryRow]
    by_model: Sequence[SummaryRow]
    days: Sequence[str]
    per_day: dict[str, dict[str, int]]
    scan: Scan
    burns: Sequence[Burn]
    links: Sequence[ReportLink]
    now_ms: int
    tags: dict[str, str] | None = None
    """The tag filter: only the events carrying all of these."""
