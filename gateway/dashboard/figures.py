"""What the dashboard shows, read from the ledger for a period and filters.

Money totals come from the same sources as ``gateway costs summary`` (``gateway.ledger.summary``): the
whole UTC days of the period from the daily counters (overall and per model, per tenant), the pieces of a
day at its ends from the events themselves (``parts_of``); kept here as one cube of tenant x day x model,
so any grouping of it adds up to the summary's, to the nano-dollar. What the counters do not hold (the
action mix, the bands, the basis of the saving, conversations, side calls) comes from one pass over the
period's events, at most ``scan_limit`` of them; the page says when it read fewer than the period holds.
With a tag filter (``tags``: the events carrying all of them), the cube too comes from the events, since
the counters hold no tags: as ``gateway costs summary --group-by tag:<key>`` reads.
"""

from __future__ import annotations

import calendar
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol, TypeVar

from gateway.config.schema.ledger import BudgetConfig
from gateway.ledger.counters import counters_of
from gateway.ledger.event import CostEvent
from gateway.ledger.period import MS_PER_DAY, Period, day_of, month_of
from gateway.ledger.reader import TenantUsage
from gateway.ledger.summary import Counters, GroupBy, LedgerSource, SummaryRow, parts_of

Stack = Literal["model", "tenant"]
MAIN_ACTIONS = ("forward", "compress", "retrieve", "reroute", "reject")
SCAN_LIMIT = 50_000
"""Events read for the figures the counters do not hold, at most: a page answers in seconds whatever the
period; the totals never depend on it."""
Cell = tuple[str, str, str]
"""(tenant, day, model)."""
K = TypeVar("K", str, Cell)


class DashboardSource(LedgerSource, Protocol):
    """What the dashboard reads: a summary's sources, the tenants and a tenant's month so far (every
    ``LedgerSource`` is one: Redis's ``LedgerReader`` or the archive's ``ArchiveReader``)."""

    async def tenants(self) -> list[str]: ...

    async def usage(self, tenant: str, *, now_ms: int) -> TenantUsage: ...


def tagged(event: CostEvent, tags: Mapping[str, str] | None) -> bool:
    """Whether the event carries every one of ``tags`` (any event, for None)."""
    if not tags:
        return True
    own = event.tags or {}
    return all(own.get(key) == value for key, value in tags.items())


async def read_cube(
    source: LedgerSource,
    *,
    tenants: Sequence[str],
    period: Period,
    tags: Mapping[str, str] | None = None,
) -> dict[Cell, Counters]:
    """Counters per (tenant, day, model) over ``period``, read as ``summarize`` reads them; only the
    events carrying ``tags``, read one by one, when given."""
    cube: dict[Cell, Counters] = {}
    if tags:
        async for event in source.merged_events(tenants, period):
            if tagged(event, tags):
                _add(cube, (event.tenant, day_of(event.time_ms), event.model), counters_of(event))
        return cube
    parts = parts_of(period)
    if parts.days is not None:
        async for tenant, day, per_model in source.daily_counters(tenants, parts.days):
            for model, counters in per_model.items():
                if model:
                    _add(cube, (tenant, day, model), counters)
    for scanned in parts.scanned:
        async for event in source.merged_events(tenants, scanned):
            _add(cube, (event.tenant, day_of(event.time_ms), event.model), counters_of(event))
    return cube


def grouped(cube: dict[Cell, Counters], group_by: GroupBy, *, model: str | None = None) -> list[SummaryRow]:
    """The cube added up by tenant, model or day (only ``model``'s cells when given), sorted by key, as
    ``summarize`` returns them."""
    index = {"tenant": 0, "day": 1, "model": 2}[group_by]
    groups: dict[str, Counters] = {}
    for cell, counters in cube.items():
        if model is None or cell[2] == model:
            _add(groups, cell[index], counters)
    return [SummaryRow(key, groups[key]) for key in sorted(groups)]


def stacked(
    cube: dict[Cell, Counters], stack: Stack, *, model: str | None = None
) -> dict[str, dict[str, int]]:
    """Cost per day, then per model or tenant: ``{day: {series: nanos}}``."""
    index = 2 if stack == "model" else 0
    days: dict[str, dict[str, int]] = {}
    for (tenant, day, cell_model), counters in cube.items():
        if model is None or cell_model == model:
            series = days.setdefault(day, {})
            key = (tenant, day, cell_model)[index]
            series[key] = series.get(key, 0) + counters.cost_nanos
    return days


@dataclass(slots=True)
class Tally:
    requests: int = 0
    cost_nanos: int = 0
    counterfactual_nanos: int = 0

    def add(self, event: CostEvent) -> None:
        self.requests += 1
        self.cost_nanos += event.cost_nanos
        self.counterfactual_nanos += event.counterfactual_nanos

    @property
    def saving_nanos(self) -> int:
        return self.counterfactual_nanos - self.cost_nanos


@dataclass(slots=True)
class Conversation:
    name: str
    tenant: str
    tally: Tally = field(default_factory=Tally)
    models: set[str] = field(default_factory=set)
    first_ms: int = 0
    last_ms: int = 0


@dataclass(slots=True)
class Scan:
    """What one pass over the period's events found."""

    events: int = 0
    complete: bool = True
    actions: dict[str, Tally] = field(default_factory=dict)
    bands: dict[str, int] = field(default_factory=dict)
    basis: dict[tuple[str, bool], Tally] = field(default_factory=dict)
    """(basis of the counterfactual, estimated) → the requests priced on it."""
    side: dict[str, Tally] = field(default_factory=dict)
    conversations: dict[str, Conversation] = field(default_factory=dict)
    untracked: Tally = field(default_factory=Tally)
    """Requests the gateway named no conversation for."""

    def add(self, event: CostEvent) -> None:
        self.events += 1
        kind = side_kind(event)
        if kind is not None:
            self.side.setdefault(kind, Tally()).add(event)
            return
        self.actions.setdefault(event.action, Tally()).add(event)
        if event.band is not None:
            self.bands[event.band] = self.bands.get(event.band, 0) + 1
        basis = (event.counterfactual_basis or "unknown", event.estimated)
        self.basis.setdefault(basis, Tally()).add(event)
        if event.conversation is None:
            self.untracked.add(event)
            return
        found = self.conversations.get(event.conversation)
        if found is None:
            found = self.conversations[event.conversation] = Conversation(
                event.conversation, event.tenant, first_ms=event.time_ms
            )
        found.tally.add(event)
        found.models.add(event.model)
        found.last_ms = max(found.last_ms, event.time_ms)

    def costliest(self, count: int) -> list[Conversation]:
        ranked = sorted(self.conversations.values(), key=lambda found: (-found.tally.cost_nanos, found.name))
        return ranked[:count]

    def main_total(self) -> Tally:
        return _sum(self.actions.values())

    def side_total(self) -> Tally:
        return _sum(self.side.values())


def _sum(tallies: Iterable[Tally]) -> Tally:
    result = Tally()
    for tally in tallies:
        result.requests += tally.requests
        result.cost_nanos += tally.cost_nanos
        result.counterfactual_nanos += tally.counterfactual_nanos
    return result


def side_kind(event: CostEvent) -> str | None:
    """The kind of call an event is when the gateway made it on a request's behalf (``<id>:summary:1``
    a summary, ``<id>:compare`` an experiment's shadow call), else None (the request's own call, even
    one that serves an earlier request, like a pre-compression)."""
    if event.parent_id is None or not event.id.startswith(event.parent_id + ":"):
        return None
    kind = event.id[len(event.parent_id) + 1 :].partition(":")[0]
    return "shadow" if kind == "compare" else kind or event.action


async def scan(
    source: LedgerSource,
    *,
    tenants: Sequence[str],
    period: Period,
    model: str | None = None,
    limit: int = SCAN_LIMIT,
    tags: Mapping[str, str] | None = None,
) -> Scan:
    found = Scan()
    async for event in source.merged_events(tenants, period):
        if (model is not None and event.model != model) or not tagged(event, tags):
            continue
        if found.events >= limit:
            found.complete = False
            break
        found.add(event)
    return found


@dataclass(frozen=True, slots=True)
class Burn:
    """A tenant's month so far against its monthly budget, and where the month is heading."""

    tenant: str
    month: str
    spent_nanos: int
    reserved_nanos: int
    limit_nanos: int | None
    forecast_nanos: int
    """The month's spend if it goes on at the rate of the month so far (linear)."""
    hard: bool

    @property
    def burn(self) -> float | None:
        return None if not self.limit_nanos else self.spent_nanos / self.limit_nanos


def burn_of(usage: TenantUsage, *, now_ms: int) -> Burn:
    budget: BudgetConfig | None = usage.budget
    month = month_of(now_ms)
    year, number = int(month[:4]), int(month[5:7])
    month_ms = calendar.monthrange(year, number)[1] * MS_PER_DAY
    first_day_ms = now_ms - (int(day_of(now_ms)[8:10]) - 1) * MS_PER_DAY - now_ms % MS_PER_DAY
    elapsed = max(1, now_ms - first_day_ms)
    spent = usage.this_month.cost_nanos
    return Burn(
        tenant=usage.tenant,
        month=month,
        spent_nanos=spent,
        reserved_nanos=usage.reserved_nanos,
        limit_nanos=budget.limit_nanos("monthly") if budget is not None else None,
        forecast_nanos=spent * month_ms // elapsed,
        hard=bool(budget and budget.hard),
    )


async def burns(source: DashboardSource, tenants: Sequence[str], *, now_ms: int) -> list[Burn]:
    return [burn_of(await source.usage(tenant, now_ms=now_ms), now_ms=now_ms) for tenant in tenants]


def _add(groups: dict[K, Counters], key: K, counters: Counters) -> None:
    groups[key] = groups.get(key, Counters()) + counters
