"""Totals from the daily counters of any ``LedgerSource`` (Redis or the archive), grouped by tenant, model
or day; or from the events themselves, grouped by the value of one of the caller's tags (``tag:team``: the
counters do not hold tags)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from gateway.base.tags import TagProblem, check_key
from gateway.ledger.counters import Counters, counters_of, read_counters
from gateway.ledger.period import MS_PER_DAY, Period, day_of
from gateway.ledger.source import LedgerSource

__all__ = [
    "GROUPS",
    "Counters",
    "GroupBy",
    "LedgerSource",
    "SummaryRow",
    "read_counters",
    "summarize",
    "total",
]


GroupBy = str
"""``tenant``, ``model``, ``day``, or ``tag:<key>`` (``group_by``)."""
GROUPS: tuple[str, ...] = ("tenant", "model", "day")
TAG_GROUP = "tag:"
UNTAGGED = ""
"""The group of the events without the tag grouped by."""


def group_by(text: str) -> GroupBy:
    """``text`` as a grouping, or ValueError saying what is allowed."""
    if text in GROUPS:
        return text
    if text.startswith(TAG_GROUP):
        try:
            check_key(text.removeprefix(TAG_GROUP))
        except TagProblem as exc:
            raise ValueError(f"{text!r}: {exc}") from None
        return text
    raise ValueError(f"{text!r} is not one of {', '.join(GROUPS)} or tag:<key>")


@dataclass(frozen=True, slots=True)
class SummaryRow:
    key: str
    counters: Counters


def whole_days(period: Period) -> bool:
    return period.start_ms % MS_PER_DAY == 0 and period.end_ms % MS_PER_DAY == 0


@dataclass(frozen=True, slots=True)
class Parts:
    """A period cut at UTC midnights: the whole days in it (read from the daily counters) and the pieces
    of a day at either end (read from the events themselves)."""

    days: Period | None
    scanned: tuple[Period, ...]


def basis_of(period: Period, group_by: GroupBy = "tenant") -> str:
    """What a summary of ``period`` reads, in words: which days come from the daily counters and which
    spans had to be scanned event by event (all of it, grouped by a tag)."""
    if group_by.startswith(TAG_GROUP):
        return f"events scanned from {_iso(period.start_ms)} to {_iso(period.end_ms)}"
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
    (``parts_of``), so that the month so far reads the counters of its past days and scans only today.
    Grouped by a tag, every event of the period is read (events without the tag: ``UNTAGGED``)."""
    groups: dict[str, Counters] = {}
    if group_by.startswith(TAG_GROUP):
        await _from_events(reader, groups, tenants=tenants, period=period, group_by=group_by)
        return [SummaryRow(key, groups[key]) for key in sorted(groups)]
    parts = parts_of(period)
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
    async for tenant, day, counters in reader.daily_counters(tenants, period):
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
    tag = group_by.removeprefix(TAG_GROUP) if group_by.startswith(TAG_GROUP) else None
    async for event in reader.merged_events(tenants, period):
        if tag is not None:
            key = (event.tags or {}).get(tag, UNTAGGED)
        else:
            key = {"tenant": event.tenant, "model": event.model, "day": day_of(event.time_ms)}[group_by]
        _add(groups, key, counters_of(event))


def _add(groups: dict[str, Counters], key: str, counters: Counters) -> None:
    groups[key] = groups.get(key, Counters()) + counters
