"""Totals from the daily counter hashes, grouped by tenant, model or day."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any, Literal, Protocol

from gateway.ledger.event import CostEvent
from gateway.ledger.period import MS_PER_DAY, Period, day_of
from gateway.ledger.reply import integer, text


class LedgerSource(Protocol):
    """What a summary reads (``gateway.ledger.reader.LedgerSource`` is one)."""

    def daily_hashes(
        self, pairs: Sequence[tuple[str, str]]
    ) -> AsyncIterator[tuple[str, str, dict[object, object]]]: ...

    def merged_events(self, tenants: Sequence[str], period: Period) -> AsyncIterator[CostEvent]: ...


GroupBy = Literal["tenant", "model", "day"]
GROUPS: tuple[GroupBy, ...] = ("tenant", "model", "day")

_FIELD_OF = {
    "requests": "requests",
    "cost": "cost_nanos",
    "saving": "saving_nanos",
    "input_tokens": "input_tokens",
    "cached_tokens": "cached_tokens",
    "output_tokens": "output_tokens",
    "reasoning_tokens": "reasoning_tokens",
}


@dataclass(frozen=True, slots=True)
class Counters:
    requests: int = 0
    cost_nanos: int = 0
    saving_nanos: int = 0
    input_tokens: int = 0
    cached_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0

    def __add__(self, other: Counters) -> Counters:
        return Counters(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(Counters)))


@dataclass(frozen=True, slots=True)
class SummaryRow:
    key: str
    counters: Counters


def read_counters(raw: Mapping[Any, Any]) -> dict[str, Counters]:
    """A counter hash → ``{"": overall, "<model>": per model}`` (model names may contain colons)."""
    values: dict[str, dict[str, int]] = {}
    for raw_name, raw_value in raw.items():
        name = text(raw_name)
        model, counter = "", name
        if name.startswith("m:"):
            model, _, counter = name[2:].rpartition(":")
        attribute = _FIELD_OF.get(counter)
        if attribute is not None:
            values.setdefault(model, {})[attribute] = integer(raw_value)
    return {model: Counters(**counts) for model, counts in values.items()}


def whole_days(period: Period) -> bool:
    return period.start_ms % MS_PER_DAY == 0 and period.end_ms % MS_PER_DAY == 0


@dataclass(frozen=True, slots=True)
class Parts:
    """A period cut at UTC midnights: the whole days in it (read from the daily counters) and the pieces
    of a day at either end (read from the events themselves)."""

    days: Period | None
    scanned: tuple[Period, ...]


def basis_of(period: Period) -> str:
    """What a summary of ``period`` reads, in words: which days come from the daily counters and which
    spans had to be scanned event by event."""
    parts = parts_of(period)
    said = []
    if parts.days is not None:
        days = parts.days.days()
        said.append(f"daily counters for {days[0]}" + (f" to {days[-1]}" if len(days) > 1 else ""))
    said += (f"events scanned from {_iso(part.start_ms)} to {_iso(part.end_ms)}" for part in parts.scanned)
    return "; ".join(said)


def _iso(ms: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ms // 1000))


def parts_of(period: Period) -> Parts:
    first_midnight = -(-period.start_ms // MS_PER_DAY) * MS_PER_DAY
    last_midnight = period.end_ms // MS_PER_DAY * MS_PER_DAY
    if first_midnight >= last_midnight:  # no whole day inside: every event is read
        return Parts(None, (period,))
    edges = (Period(period.start_ms, first_midnight) if period.start_ms < first_midnight else None,
             Period(last_midnight, period.end_ms) if last_midnight < period.end_ms else None)  # fmt: skip
    return Parts(Period(first_midnight, last_midnight), tuple(edge for edge in edges if edge is not None))


async def summarize(
    reader: LedgerSource, *, tenants: Sequence[str], period: Period, group_by: GroupBy
) -> list[SummaryRow]:
    """Totals per group over the period, sorted by key: its whole UTC days from the daily counters, and
    the pieces of a day at its ends (a period with a time of day) from their own events
    (``parts_of``), so that the month so far reads the counters of its past days and scans only today."""
    parts = parts_of(period)
    groups: dict[str, Counters] = {}
    if parts.days is not None:
        await _from_counters(reader, groups, tenants=tenants, period=parts.days, group_by=group_by)
    for scanned in parts.scanned:
        await _from_events(reader, groups, tenants=tenants, period=scanned, group_by=group_by)
    return [SummaryRow(key, groups[key]) for key in sorted(groups)]


async def _from_counters(
    reader: LedgerSource,
    groups: dict[str, Counters],
    *,
    tenants: Sequence[str],
    period: Period,
    group_by: GroupBy,
) -> None:
    pairs = [(tenant, day) for tenant in tenants for day in period.days()]
    async for tenant, day, raw in reader.daily_hashes(pairs):
        counters = read_counters(raw)
        if group_by == "model":
            for model, per_model in counters.items():
                if model:
                    _add(groups, model, per_model)
            continue
        overall = counters.get("")
        if overall is not None:
            _add(groups, tenant if group_by == "tenant" else day, overall)


def total(rows: Sequence[SummaryRow]) -> Counters:
    result = Counters()
    for row in rows:
        result += row.counters
    return result


async def _from_events(
    reader: LedgerSource,
    groups: dict[str, Counters],
    *,
    tenants: Sequence[str],
    period: Period,
    group_by: GroupBy,
) -> None:
    async for event in reader.merged_events(tenants, period):
        key = {"tenant": event.tenant, "model": event.model, "day": day_of(event.time_ms)}[group_by]
        _add(
            groups,
            key,
            Counters(
                requests=1,
                cost_nanos=event.cost_nanos,
                saving_nanos=event.saving_nanos,
                input_tokens=event.input_tokens,
                cached_tokens=event.cached_tokens,
                output_tokens=event.output_tokens,
                reasoning_tokens=event.reasoning_tokens,
            ),
        )


def _add(groups: dict[str, Counters], key: str, counters: Counters) -> None:
    groups[key] = groups.get(key, Counters()) + counters
