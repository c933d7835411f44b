"""Observers run on the event loop's next turn, each record in its own callback, and know whether another
record's observers are still waiting after theirs."""

from __future__ import annotations

import asyncio

import pytest

from gateway.base.record import RequestRecord, last_notified, notify_soon

pytestmark = pytest.mark.anyio


def record(number: int) -> RequestRecord:
    return RequestRecord(request_id=f"req_{number}", endpoint="chat")


async def test_only_the_observers_of_the_last_waiting_record_are_told_they_are_last() -> None:
    seen: list[tuple[str, bool]] = []

    def observer(record: RequestRecord) -> None:
        seen.append((record.request_id, last_notified()))

    for number in range(3):
        notify_soon((observer,), record(number))
    assert (seen, last_notified()) == ([], False)  # not in the turn that notified them
    await asyncio.sleep(0)
    assert seen == [("req_0", False), ("req_1", False), ("req_2", True)]
    notify_soon((observer,), record(3))
    await asyncio.sleep(0)
    assert seen[3:] == [("req_3", True)]
    assert last_notified() is False


def test_each_event_loop_counts_its_own() -> None:
    seen: list[bool] = []

    async def notify_and_wait() -> None:
        notify_soon((lambda record: seen.append(last_notified()),), record(1))
        await asyncio.sleep(0)

    asyncio.run(notify_and_wait())
    asyncio.run(notify_and_wait())
    assert seen == [True, True]
