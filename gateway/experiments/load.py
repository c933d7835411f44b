"""How busy the process is, as shadow calls see it: the share of one core it used over the last second.

A process serving all the requests it can uses its core fully; a lightly loaded one a small share of it,
and one slow moment (a large prompt counted inline) barely moves a one-second window. The share is
sampled every ``interval`` seconds by one task, started with the first shadow call (a process without
experiments runs none), over the last ``window`` samples.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Callable

INTERVAL_SECONDS = 0.25
WINDOW = 4


class ProcessLoad:
    def __init__(
        self,
        *,
        interval: float = INTERVAL_SECONDS,
        window: int = WINDOW,
        wall: Callable[[], float] = time.monotonic,
        cpu: Callable[[], float] = time.process_time,
    ) -> None:
        """``wall`` and ``cpu``: the clocks read (the process's, unless a test gives its own)."""
        self.interval = interval
        self._wall, self._cpu = wall, cpu
        self.share = 0.0
        """CPU seconds the process used per second, over the window (1.0: one core, fully)."""
        self._samples: deque[tuple[float, float]] = deque(maxlen=window + 1)
        self._task: asyncio.Task[None] | None = None

    def watch(self) -> None:
        """Start sampling (once)."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="process_load")

    def sample(self) -> None:
        self._samples.append((self._wall(), self._cpu()))
        (first_wall, first_cpu), (last_wall, last_cpu) = self._samples[0], self._samples[-1]
        if last_wall > first_wall:
            self.share = (last_cpu - first_cpu) / (last_wall - first_wall)

    async def _run(self) -> None:
        while True:
            self.sample()
            await asyncio.sleep(self.interval)

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
