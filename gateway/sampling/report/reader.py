"""Reading samples and probe results back from Redis, newest first up to a limit, returned oldest first.

A report reads up to 200,000 entries: each page is parsed in a worker thread, so a read of that size
does not hold the event loop (and the requests it serves) for seconds.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import anyio
import structlog
from redis.asyncio import Redis

from gateway.sampling.keys import SamplingKeys
from gateway.sampling.probes.needle import ProbeResult
from gateway.sampling.signals import Signal

T = TypeVar("T")
PAGE = 5_000
DEFAULT_LIMIT = 200_000

log = structlog.get_logger("gateway.sampling")


class SampleReader:
    def __init__(self, redis: Redis, *, keys: SamplingKeys | None = None) -> None:
        self._redis = redis
        self.keys = keys or SamplingKeys()

    async def models(self) -> list[str]:
        members = await self._redis.smembers(self.keys.models())
        return sorted(member.decode() if isinstance(member, bytes) else str(member) for member in members)

    async def samples(
        self, model: str, *, since_ms: int = 0, until_ms: int | None = None, limit: int = DEFAULT_LIMIT
    ) -> list[Signal]:
        return await self._read(self.keys.samples(model), Signal.from_fields, since_ms, until_ms, limit)

    async def probes(
        self, model: str, *, since_ms: int = 0, until_ms: int | None = None, limit: int = DEFAULT_LIMIT
    ) -> list[ProbeResult]:
        return await self._read(self.keys.probes(model), ProbeResult.from_fields, since_ms, until_ms, limit)

    async def _read(
        self,
        key: str,
        parse: Callable[[Mapping[bytes | str, bytes | str]], T],
        since_ms: int,
        until_ms: int | None,
        limit: int,
    ) -> list[T]:
        """Entries of ``key`` with ids in [since_ms, until_ms), the newest ``limit`` of them, in time order.
        Entries that do not parse are skipped and counted in a log line."""
        found: list[T] = []
        high = "+" if until_ms is None else f"({until_ms}-0"
        low = f"{since_ms}-0"
        skipped = 0
        while len(found) < limit:
            wanted = min(PAGE, limit - len(found))
            page = await self._redis.xrevrange(key, max=high, min=low, count=wanted)
            if not page:
                break
            parsed, unreadable = await anyio.to_thread.run_sync(_parse_page, page, parse)
            found.extend(parsed)
            skipped += unreadable
            last_id = page[-1][0]
            high = f"({last_id.decode() if isinstance(last_id, bytes) else last_id}"
            if len(page) < wanted:
                break
        if skipped:
            log.warning("sampling_entries_unreadable", key=key, skipped=skipped)
        found.reverse()
        return found


def _parse_page(
    page: Sequence[Any], parse: Callable[[Mapping[bytes | str, bytes | str]], T]
) -> tuple[list[T], int]:
    """The entries of one ``XREVRANGE`` page that parse, and how many did not."""
    found: list[T] = []
    skipped = 0
    for _, fields in page:
        if not fields:
            skipped += 1
            continue
        try:
            found.append(parse(fields))
        except (KeyError, ValueError):
            skipped += 1
    return found, skipped
