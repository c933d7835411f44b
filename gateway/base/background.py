"""Work the gateway does after a response (pre-compression): bounded, logged, never awaited by a client."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

import structlog

log = structlog.get_logger("gateway.background")


class Background:
    def __init__(self, *, limit: int = 8) -> None:
        self._tasks: set[asyncio.Task[None]] = set()
        self._limit = limit

    def spawn(self, work: Awaitable[object], *, name: str, then: Callable[[], None] | None = None) -> bool:
        """Start ``work`` unless ``limit`` jobs already run (then it is skipped: it is an optimisation)."""
        if len(self._tasks) >= self._limit:
            if asyncio.iscoroutine(work):
                work.close()
            log.info("background_skipped", job=name, running=len(self._tasks))
            return False

        async def run() -> None:
            try:
                await work
            except Exception:
                log.exception("background_failed", job=name)
            finally:
                if then is not None:
                    then()

        task = asyncio.get_running_loop().create_task(run(), name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return True

    def __len__(self) -> int:
        return len(self._tasks)

    async def aclose(self, timeout: float = 10.0) -> None:
        """Let running jobs finish for up to ``timeout`` seconds, then cancel what is left."""
        if not self._tasks:
            return
        _, pending = await asyncio.wait(set(self._tasks), timeout=timeout)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)


async def wind_down(queue: asyncio.Queue[Any], task: asyncio.Task[None], timeout: float) -> None:
    """Give a queue's writer task ``timeout`` seconds to empty it, then stop the task (what is still
    queued is the caller's to keep or drop). Never raises what the task raised: that is logged, so the
    caller always gets to deal with what is left."""
    if not task.done():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(queue.join(), timeout)
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass
    except Exception:
        log.exception("writer_task_failed", task=task.get_name())
