"""Settling a request's rate-limit hold once it is over: an observer, after the ledger's (whose cost it
reads), that gives back the tokens and dollars the request held and did not use.

What it used: its usage's input plus output tokens and its cost events' sum (``RequestRecord.cost_nanos``).
A request that never reached a model used nothing but its request. One whose model answered without a
usage (a stream cut before its end) keeps its token hold: the gateway cannot tell what it used, and the hold
is the most it can have. A background response still running keeps its whole hold (its cost is recorded
when it ends, elsewhere). The settlement runs as a task of its own, never on the client's path.
"""

from __future__ import annotations

import asyncio

from gateway.base.record import RequestRecord
from gateway.ratelimits.limiter import RATE_HOLD, RateLimiter


class RateSettler:
    def __init__(self, limiter: RateLimiter) -> None:
        self._limiter = limiter
        self._tasks: set[asyncio.Task[None]] = set()

    def __call__(self, record: RequestRecord) -> None:
        if record.notes is None:
            return
        hold = record.note(RATE_HOLD)
        if hold is None or not hold.counters or record.pending_response is not None:
            return
        record.put(RATE_HOLD, None)  # settled once, however often the record is told of
        if record.usage is not None:
            tokens = record.usage.input_tokens + record.usage.output_tokens
        else:
            tokens = hold.demand.tokens if record.called_model is not None else 0
        task = asyncio.get_running_loop().create_task(
            self._limiter.settle(hold, tokens=tokens, nanos=record.cost_nanos or 0)
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def drain(self) -> None:
        """Wait for the settlements under way (shutdown, tests)."""
        while self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
