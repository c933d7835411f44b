"""When a background writer takes its next batch for Redis, and how ``drain()`` and ``close()`` hurry it.

A writer task (the ledger's, the sampler's) takes what is queued and sends it in one pipelined round trip,
after waiting a little so that one round trip carries many. ``wait(seconds)`` is that wait: it returns at
once, or ends early, while a ``drain()`` or ``close()`` is in ``hurried()``. ``next_turn(period)`` paces
the writer at most once in ``period``: when the last turn was longer ago, the turn is now, so at low traffic
an item reaches Redis straight away; when it was sooner, the writer waits for the rest of the period and
what is queued meanwhile goes with it. A full batch does not wait.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager


class WritePace:
    def __init__(self) -> None:
        self._last = float("-inf")
        """The loop's time of the last ``next_turn``."""
        self._waiter: asyncio.Future[None] | None = None
        """Set while ``wait`` waits."""
        self._hurried = 0
        """Callers in ``hurried()``: nothing waits meanwhile."""

    async def wait(self, seconds: float) -> None:
        """Wait ``seconds``, or less when hurried."""
        if seconds <= 0 or self._hurried:
            return
        loop = asyncio.get_running_loop()
        waiter = self._waiter = loop.create_future()
        timer = loop.call_later(seconds, _end, waiter)
        try:
            await waiter
        finally:
            timer.cancel()
            self._waiter = None

    async def next_turn(self, period: float, *, full: bool = False) -> None:
        """Return when the writer may take its next batch (``full``: one is already there)."""
        loop = asyncio.get_running_loop()
        if not full:
            await self.wait(self._last + period - loop.time())
        self._last = loop.time()

    @contextmanager
    def hurried(self) -> Iterator[None]:
        """While inside: the wait in progress ends, and later ones return at once."""
        self._hurried += 1
        _end(self._waiter)
        try:
            yield
        finally:
            self._hurried -= 1


def _end(waiter: asyncio.Future[None] | None) -> None:
    if waiter is not None and not waiter.done():
        waiter.set_result(None)
