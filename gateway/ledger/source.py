"""The one interface that reads the ledger back, whatever holds it: ``LedgerSource``.

Two implementations answer it the same way, to the nano-dollar and in the same order:
``gateway.ledger.reader.LedgerReader`` reads Redis (the write path, and all there is without an archive);
``gateway.ledger.archive_reader.ArchiveReader`` reads the PostgreSQL archive (``ledger.archive``).
``gateway.ledger.sources.ledger_source`` picks by the config. Exports, summaries (``summarize``), the FOCUS
file, ``gateway costs`` and ``/v1/gateway/usage`` read through it; so should anything new that reads spend.

- ``tenants()``: every tenant with events, sorted.
- ``events(tenant, period)``: one tenant's events with ``start_ms <= time_ms < end_ms``, in time order
  (ties in the order they were written), streamed with constant memory.
- ``merged_events(tenants, period)``: several tenants' events in one time order (ties: the tenant listed
  first), streamed.
- ``daily_counters(tenants, days)``: ``(tenant, day, {"": overall, model: per model})`` for each UTC day of
  ``days`` that has events; whole days only (read from counters kept per day, not from the events).
- ``usage(tenant, now_ms=…)``: today's and this month's counters, the open budget reservations and the
  budget, as ``/v1/gateway/usage`` shows them. Always live (Redis): budgets are enforced on these counters.
- ``export(tenants, period, fmt)``: ``merged_events`` as an export file (``gateway.ledger.formats``: CSV,
  JSON, NDJSON or FOCUS), in chunks of bytes; the same bytes from either source. The archive has the
  server write it (``gateway.ledger.archive_export``).
"""

from __future__ import annotations

import heapq
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, TypeVar

from gateway.config.schema.ledger import BudgetConfig
from gateway.ledger.counters import Counters
from gateway.ledger.event import CostEvent
from gateway.ledger.period import Period

ExportFormat = Literal["csv", "json", "ndjson", "focus"]
"""``focus``: CSV in FinOps FOCUS 1.2 columns (``gateway.ledger.focus``)."""
T = TypeVar("T")
DayCounters = tuple[str, str, dict[str, Counters]]
"""``(tenant, "2026-11-30", {"": overall, "<model>": per model})``."""


@dataclass(frozen=True, slots=True)
class TenantUsage:
    tenant: str
    day: str
    month: str
    today: Counters
    this_month: Counters
    reserved_nanos: int
    budget: BudgetConfig | None


class LedgerSource(Protocol):
    """What reads the ledger (see the module's text for what each method answers)."""

    async def tenants(self) -> list[str]: ...

    def events(self, tenant: str, period: Period) -> AsyncIterator[CostEvent]: ...

    def merged_events(self, tenants: Sequence[str], period: Period) -> AsyncIterator[CostEvent]: ...

    def daily_counters(self, tenants: Sequence[str], days: Period) -> AsyncIterator[DayCounters]: ...

    async def usage(self, tenant: str, *, now_ms: int) -> TenantUsage: ...

    def export(self, tenants: Sequence[str], period: Period, fmt: ExportFormat) -> AsyncIterator[bytes]: ...


def time_of(event: CostEvent) -> int:
    return event.time_ms


async def merge_in_time(sources: Sequence[AsyncIterator[CostEvent]]) -> AsyncIterator[CostEvent]:
    """Streams already in time order merged into one; ties go to the stream listed first. Holds one event
    per stream."""
    heap: list[tuple[int, int, CostEvent]] = []
    for number, source in enumerate(sources):
        first = await anext(source, None)
        if first is not None:
            heap.append((first.time_ms, number, first))
    heapq.heapify(heap)
    while heap:
        _, number, event = heapq.heappop(heap)
        yield event
        following = await anext(sources[number], None)
        if following is not None:
            heapq.heappush(heap, (following.time_ms, number, following))


async def merge_blocks(
    sources: Sequence[AsyncIterator[Sequence[T]]], *, key: Callable[[T], int]
) -> AsyncIterator[T]:
    """``merge_in_time`` for streams that come in blocks (pages of rows), by ``key`` (an item's time):
    only a block's end waits."""
    if len(sources) == 1:  # nothing to merge
        async for block in sources[0]:
            for item in block:
                yield item
        return
    heap: list[tuple[int, int, int]] = []
    blocks: list[Sequence[T]] = []
    for number, source in enumerate(sources):
        block = await _next_block(source)
        blocks.append(block)
        if block:
            heap.append((key(block[0]), number, 0))
    heapq.heapify(heap)
    while heap:
        _, number, position = heap[0]
        block = blocks[number]
        yield block[position]
        position += 1
        if position == len(block):
            block = blocks[number] = await _next_block(sources[number])
            position = 0
        if block:
            heapq.heapreplace(heap, (key(block[position]), number, position))
        else:
            heapq.heappop(heap)


async def _next_block(source: AsyncIterator[Sequence[T]]) -> Sequence[T]:
    """The next block, or an empty one at the end (``anext(source, ())`` trips over its tuple default)."""
    try:
        return await anext(source)
    except StopAsyncIteration:
        return ()
