"""How busy the process is, as shadow calls see it: how late the event loop runs a timer.

A process serving all the requests it can runs every callback late; an idle or lightly loaded one runs
them on time. The lag is sampled every ``interval`` seconds by one task, started with the first shadow
call (a process without experiments runs none); a rise shows at once, and it decays by ``DECAY`` per
sample, so one slow moment does not shed shadow calls for long.
"""

from __future__ import annotations

import asyncio
import contextlib

INTERVAL_SECONDS = 0.05
DECAY = 0.7


class LoopLag:
    def __init__(self, *, interval: float = INTERVAL_SECONDS) -> None:
        self.interval = interval
        self.seconds = 0.0
        """The recent lag: the last sample, or the decayed earlier one when that is larger."""
        self._task: asyncio.Task[None] | None = None

    def watch(self) -> None:
        """Start sampling (once)."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="loop_lag")

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            started = loop.time()
            await asyncio.sleep(self.interval)
            late = max(0.0, loop.time() - started - self.interval)
            self.seconds = max(late, self.seconds * DECAY)

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
