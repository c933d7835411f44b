"""``WritePace``: when a background writer takes its next batch, and how drain and close hurry it."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from gateway.base.pace import WritePace

HOUR = 3600.0


@pytest.mark.anyio
async def test_an_idle_writer_turns_at_once_and_the_next_turn_waits_until_hurried() -> None:
    pace = WritePace()
    async with asyncio.timeout(5):
        await pace.next_turn(HOUR)  # nothing taken in the last hour: now
        await pace.next_turn(HOUR, full=True)  # a full batch never waits
        waiting = asyncio.create_task(pace.next_turn(HOUR))
        await asyncio.sleep(0.01)
        assert not waiting.done()  # the rest of the hour
        with pace.hurried():
            await waiting  # ended by the hurry
            await pace.wait(HOUR)  # and nothing waits while it lasts
    waiting = asyncio.create_task(pace.wait(HOUR))
    await asyncio.sleep(0.01)
    assert not waiting.done()  # once out of the hurry, waits are whole again
    waiting.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await waiting
