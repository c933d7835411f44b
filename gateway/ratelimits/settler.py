"""Settling a request's rate-limit hold once it is over: an observer, after the ledger's (whose cost it
reads), that gives back the tokens and dollars the request held and did not use.

What it used: its usage's input plus output tokens and its cost events' sum (``RequestRecord.cost_nanos``).
A request that never reached a model used nothing but its request. One whose model answered without a
usage (a stream cut before its end) keeps its token hold: the gateway cannot tell what it used, and the hold
is the most it can have. A background response still running keeps its whole hold (its cost is recorded
when it ends, elsewhere).

Settlements wait ``LINGER_SECONDS`` and go together: what each counter gets back is summed over the
requests that ended meanwhile, and each tenant's counters are settled in one script, so a busy tenant pays
one Redis call per few milliseconds instead of one per request (a call costs the gateway about as much CPU
as the rest of a small request). Never on the client's path; meanwhile the counters hold a little more than
they will, which can only refuse, never admit, too much.
"""

from __future__ import annotations

import asyncio

from gateway.base.record import RequestRecord
from gateway.ratelimits.limiter import RATE_HOLD, RateLimiter, Return

LINGER_SECONDS = 0.005


class RateSettler:
    def __init__(self, limiter: RateLimiter, *, linger: float = LINGER_SECONDS) -> None:
        self._limiter = limiter
        self._linger = linger
        self._pending: dict[str, dict[str, Return]] = {}
        """By tenant, by counter key: what to give back."""
        self._tasks: set[asyncio.Task[None]] = set()
        self._flush: asyncio.TimerHandle | None = None

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
        returns = hold.returns(tokens=tokens, nanos=record.cost_nanos or 0)
        if not returns:
            return
        pending = self._pending.setdefault(hold.tenant, {})
        for back in returns:
            found = pending.get(back.key)
            pending[back.key] = (
                back if found is None else Return(back.key, back.capacity, found.amount + back.amount)
            )
        if self._flush is None:
            self._flush = asyncio.get_running_loop().call_later(self._linger, self._send)

    def _send(self) -> None:
        self._flush = None
        pending, self._pending = self._pending, {}
        for returns in pending.values():
            task = asyncio.get_running_loop().create_task(self._limiter.give_back(list(returns.values())))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def drain(self) -> None:
        """Send what waits and wait for the settlements under way (shutdown, tests)."""
        if self._flush is not None:
            self._flush.cancel()
            self._send()
        while self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
