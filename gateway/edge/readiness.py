"""What ``/readyz`` answers: ready while the config is loaded and cost events can be written.

Each poll costs one Redis round trip and no more: a write probe (``SET <prefix>:probe``, as the ledger's own
probe; a write, since a Redis that answers PING may still refuse writes: out of memory, a read-only replica,
too few replicas), plus what is already known in the process: whether the ledger's writer has Redis down
(its last write or probe failed) and whether the Redis client fits the node (``gateway.redis.mode``).

Not flapping on one slow moment: a failing probe or writer makes the pod unready only once it has kept
failing for ``grace`` seconds, that is, seen failing by polls at least that far apart with no success
between them (a write that took longer than the ledger's timeout marks it down until its next probe, a
second later). Until then the check names the failure and the pod stays ready; one success clears it.
A client of the wrong kind for the node fails at once, having nothing slow about it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import anyio
import redis.asyncio as aioredis

from gateway.ledger import Ledger
from gateway.redis.mode import ModeWatch

GRACE_SECONDS = 3.0
PROBE_TIMEOUT_SECONDS = 1.0
PROBE_TTL_MS = 60_000
WRITER_DOWN = "down: the ledger's writes to Redis fail; events go to the spool"


@dataclass(frozen=True, slots=True)
class Verdict:
    ready: bool
    checks: dict[str, str]


class Lasting:
    """A failure that counts once it has lasted ``grace`` seconds without a success between."""

    __slots__ = ("_grace", "_since")

    def __init__(self, grace: float) -> None:
        self._grace = grace
        self._since: float | None = None

    def report(self, problem: str | None, now: float) -> tuple[bool, str]:
        """(failing, what to show) for this poll's observation."""
        if problem is None:
            self._since = None
            return False, "ok"
        if self._since is None:
            self._since = now
        lasted = now - self._since
        if lasted >= self._grace:
            return True, problem
        return False, f"{problem} (for {lasted:.1f} s; not ready after {self._grace:g} s)"


class Readiness:
    def __init__(
        self,
        redis: aioredis.Redis,
        ledger: Ledger,
        mode: ModeWatch,
        *,
        grace: float = GRACE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._redis = redis
        self._ledger = ledger
        self._mode = mode
        self._clock = clock
        self._probe_failure = Lasting(grace)
        self._writer_down = Lasting(grace)

    async def verdict(self) -> Verdict:
        probe = await self._probe()
        now = self._clock()
        writer = None if self._ledger.stats().redis_up else WRITER_DOWN
        probe_failing, probe_text = self._probe_failure.report(probe, now)
        writer_failing, writer_text = self._writer_down.report(writer, now)
        mode = self._mode.check()
        checks = {"config": "ok", "redis": probe_text, "ledger": writer_text, "redis_mode": mode}
        ready = not (probe_failing or writer_failing) and self._mode.problem is None
        return Verdict(ready=ready, checks=checks)

    async def _probe(self) -> str | None:
        try:
            with anyio.fail_after(PROBE_TIMEOUT_SECONDS):
                await self._redis.set(self._ledger.keys.probe(), "1", px=PROBE_TTL_MS)
        except Exception as exc:  # any failure to take the write means not ready; the reason is reported
            return f"write probe failed: {type(exc).__name__}{f': {exc}' if str(exc) else ''}"
        return None
