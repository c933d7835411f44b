"""Reading the ledger back from Redis: events in time order with constant memory, counters, a tenant's usage.

Events are listed through each month's time index (``order`` zset, members ``<time_ms>|<stream id>``),
a page at a time, so the order is the events' own time even for events replayed from a spool long after
they happened, and a page is all that is ever held. The stream entries of a page are fetched with one
XRANGE over the page's span of stream ids (usually exactly the page), falling back to one XRANGE per
entry only for those the span did not cover. Events of one tenant sharing a millisecond follow their
members' text order (the archive orders them the same way): stable and the same from both, though not
always the order they were written in.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence

from redis.asyncio import Redis
from redis.exceptions import ResponseError

from gateway.ledger.budget import BudgetLookup
from gateway.ledger.counters import Counters, read_counters
from gateway.ledger.event import CostEvent
from gateway.ledger.formats import encode_events
from gateway.ledger.keys import LedgerKeys
from gateway.ledger.period import Period, day_of, month_of
from gateway.ledger.reply import integer, text
from gateway.ledger.source import DayCounters, ExportFormat, TenantUsage, merge_in_time

__all__ = ["LedgerReader", "TenantUsage"]


def _stream_order(stream_id: str) -> tuple[int, int]:
    milliseconds, _, sequence = stream_id.partition("-")
    return int(milliseconds), int(sequence or 0)


class LedgerReader:
    """The ``LedgerSource`` of Redis (``gateway.ledger.source``)."""

    def __init__(
        self,
        redis: Redis,
        *,
        keys: LedgerKeys | None = None,
        budget_of: BudgetLookup | None = None,
        page_size: int = 1000,
    ) -> None:
        self.keys = keys or LedgerKeys()
        self.budget_of = budget_of
        self.page_size = page_size
        self._redis = redis

    async def tenants(self) -> list[str]:
        """Every tenant that has recorded an event (within or beyond the retention)."""
        members = await self._redis.smembers(self.keys.tenants())
        return sorted(text(member) for member in members)

    async def events(self, tenant: str, period: Period) -> AsyncIterator[CostEvent]:
        """One tenant's events with ``period.start_ms <= time_ms < period.end_ms``, in time order."""
        low, high = f"[{period.start_ms:013d}", f"({period.end_ms:013d}"
        for month in period.months():
            index, stream = self.keys.order(tenant, month), self.keys.stream(tenant, month)
            start = low
            while True:
                page = await self._redis.zrangebylex(index, start, high, 0, self.page_size)
                members = [text(member) for member in page]
                if not members:
                    break
                ids = [member.partition("|")[2] for member in members]
                entries = await self._entries(stream, ids)
                for stream_id in ids:
                    payload = entries.get(stream_id)
                    if payload is not None:
                        yield CostEvent.from_json(payload)
                if len(members) < self.page_size:
                    break
                start = f"({members[-1]}"

    async def merged_events(self, tenants: Sequence[str], period: Period) -> AsyncIterator[CostEvent]:
        """Several tenants' events merged into one time order; holds one page per tenant."""
        async for event in merge_in_time([self.events(tenant, period) for tenant in tenants]):
            yield event

    def export(self, tenants: Sequence[str], period: Period, fmt: ExportFormat) -> AsyncIterator[bytes]:
        """``merged_events`` encoded in ``fmt`` by the gateway."""
        return encode_events(self.merged_events(tenants, period), fmt)

    async def daily_counters(self, tenants: Sequence[str], days: Period) -> AsyncIterator[DayCounters]:
        """Each tenant's counters of each day of ``days`` that has any."""
        pairs = [(tenant, day) for tenant in tenants for day in days.days()]
        async for tenant, day, raw in self.daily_hashes(pairs):
            counters = read_counters(raw)
            if counters:
                yield tenant, day, counters

    async def usage(self, tenant: str, *, now_ms: int) -> TenantUsage:
        day, month = day_of(now_ms), month_of(now_ms)
        pipe = self._redis.pipeline(transaction=False)
        pipe.hgetall(self.keys.daily(tenant, day))
        pipe.hgetall(self.keys.monthly(tenant, month))
        pipe.hget(self.keys.holds(tenant), "total")
        daily, monthly, held = await pipe.execute()
        return TenantUsage(
            tenant=tenant,
            day=day,
            month=month,
            today=read_counters(daily).get("", Counters()),
            this_month=read_counters(monthly).get("", Counters()),
            reserved_nanos=max(0, integer(held)),
            budget=self.budget_of(tenant) if self.budget_of else None,
        )

    async def daily_hashes(
        self, pairs: Sequence[tuple[str, str]], *, chunk: int = 500
    ) -> AsyncIterator[tuple[str, str, dict[object, object]]]:
        """``(tenant, day, raw hash)`` for each ``(tenant, day)`` pair, read in pipelined chunks."""
        for first in range(0, len(pairs), chunk):
            part = pairs[first : first + chunk]
            pipe = self._redis.pipeline(transaction=False)
            for tenant, day in part:
                pipe.hgetall(self.keys.daily(tenant, day))
            for (tenant, day), raw in zip(part, await pipe.execute(raise_on_error=False), strict=True):
                if isinstance(raw, ResponseError):  # foreign data under a ledger key: not a counter hash
                    continue
                yield tenant, day, raw

    async def _entries(self, stream: str, ids: Sequence[str]) -> dict[str, bytes | str]:
        ordered = sorted(ids, key=_stream_order)
        wanted = set(ids)
        found: dict[str, bytes | str] = {}
        span = await self._redis.xrange(stream, ordered[0], ordered[-1], count=2 * len(ids))
        for raw_id, fields in span or ():
            stream_id = text(raw_id)
            if stream_id in wanted and fields:
                found[stream_id] = _payload(fields)
        missing = [stream_id for stream_id in ordered if stream_id not in found]
        if missing:
            pipe = self._redis.pipeline(transaction=False)
            for stream_id in missing:
                pipe.xrange(stream, stream_id, stream_id, count=1)
            for entries in await pipe.execute():
                for raw_id, fields in entries or ():
                    if fields:
                        found[text(raw_id)] = _payload(fields)
        return found


def _payload(fields: Mapping[bytes | str, bytes | str]) -> bytes | str:
    value = fields.get(b"event", fields.get("event"))
    if not isinstance(value, bytes | str):
        raise ValueError("a ledger stream entry without an event field")
    return value
