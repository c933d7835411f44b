"""Remembered responses Redis could not take in time: kept on disk and in the process until it does.

A client that got a 200 for a stored response must be able to fetch it and chain to it
(``previous_response_id``), so what the gateway remembers of it is never dropped. When the write does not
go through before the answer leaves (Redis away, a cluster failing over, a machine too busy), the value is
appended to a spool of its own (``<data dir>/spool-responses``: the ledger's segment files, flushed and
fsynced, claimed by the next process if this one dies) and kept in memory, where ``recall`` finds it in
this process at once. A background task writes the spool to Redis every ``RETRY_SECONDS``, oldest first,
and forgets each value once it is in Redis. A value whose time to live ran out while it waited is dropped
(the upstream has forgotten the response by then too).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

import orjson
import structlog

from gateway.ledger.spool import Spool

RETRY_SECONDS = 0.25
BATCH = 200

Write = Callable[[Sequence[tuple[str, str, bytes, int]]], Awaitable[int]]
"""``write([(tenant, response id, value, ttl ms), …])``: write them to Redis; how many were written, in
order (a failure raises or stops the count)."""

log = structlog.get_logger("gateway.responses")


class UnwrittenResponses:
    def __init__(self, directory: Path | None, write: Write) -> None:
        """``directory`` None: kept in memory only (tests, tools)."""
        self._spool = Spool(directory) if directory is not None else None
        self._write = write
        self._held: dict[tuple[str, str], tuple[bytes, int]] = {}
        """(tenant, id) → (value, expires at, epoch ms)."""
        self._task: asyncio.Task[None] | None = None
        self.written = 0
        self.spooled = 0

    def start(self) -> None:
        """Claim the spools of processes that died, and write them in the background."""
        if self._spool is not None and self._spool.claim_orphans():
            for segment in self._spool.seal():
                for lines in self._spool.read(segment, batch=BATCH):
                    for line in lines:
                        self._keep(line)
        self._started()

    def hold(self, tenant: str, response_id: str, value: bytes, ttl_ms: int) -> None:
        """Keep ``value`` until Redis takes it: on disk (synced when this returns) and in memory."""
        line = orjson.dumps({"t": tenant, "id": response_id, "v": value.decode(), "x": _now_ms() + ttl_ms})
        if self._spool is not None:
            self._spool.append([line])
        self._keep(line)
        self.spooled += 1
        log.warning("response_memory_spooled", tenant=tenant, response_id=response_id[:64])
        self._started()

    def get(self, tenant: str, response_id: str) -> bytes | None:
        found = self._held.get((tenant, response_id))
        if found is None or found[1] <= _now_ms():
            return None
        return found[0]

    def __len__(self) -> int:
        return len(self._held)

    @property
    def waiting(self) -> bool:
        """Whether values wait for Redis: new ones join them at once rather than make an answer wait."""
        return bool(self._held)

    async def flush(self) -> bool:
        """Write everything held, oldest first; whether nothing is left."""
        if self._spool is None:
            return await self._flush_memory()
        for segment in self._spool.seal():
            for lines in self._spool.read(segment, batch=BATCH):
                if not await self._write_lines(lines):
                    return False
            self._spool.discard(segment)
        return not self._held

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        with contextlib.suppress(Exception):  # one last try; what is left stays on disk for the next start
            await self.flush()
        if self._spool is not None:
            self._spool.close()

    def _keep(self, line: bytes) -> None:
        try:
            item = orjson.loads(line)
            self._held[(str(item["t"]), str(item["id"]))] = (str(item["v"]).encode(), int(item["x"]))
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            log.error("response_memory_unreadable_spool_line", line=line[:200].decode("utf-8", "replace"))

    async def _write_lines(self, lines: Sequence[bytes]) -> bool:
        items = []
        now = _now_ms()
        for line in lines:
            try:
                item = orjson.loads(line)
                tenant, response_id, expires = str(item["t"]), str(item["id"]), int(item["x"])
            except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
                continue
            if expires > now:
                items.append((tenant, response_id, str(item["v"]).encode(), expires - now))
            else:
                self._held.pop((tenant, response_id), None)
        try:
            done = await self._write(items)
        except Exception as exc:  # Redis still away: everything stays held
            log.info("response_memory_still_unwritten", held=len(self._held), error=str(exc)[:200])
            return False
        for tenant, response_id, _, _ in items[:done]:
            self._held.pop((tenant, response_id), None)
        self.written += done
        return done == len(items)

    async def _flush_memory(self) -> bool:
        now = _now_ms()
        items = [
            (tenant, response_id, value, expires - now)
            for (tenant, response_id), (value, expires) in self._held.items()
            if expires > now
        ]
        try:
            done = await self._write(items)
        except Exception:
            return False
        for tenant, response_id, _, _ in items[:done]:
            self._held.pop((tenant, response_id), None)
        self.written += done
        return not self._held

    def _started(self) -> None:
        if self._held and (self._task is None or self._task.done()):
            with contextlib.suppress(RuntimeError):  # no running loop (start() from a thread): next hold
                self._task = asyncio.get_running_loop().create_task(self._run(), name="responses_unwritten")

    async def _run(self) -> None:
        while self._held:
            await asyncio.sleep(RETRY_SECONDS)
            if await self.flush():
                log.info("response_memory_written", written=self.written)


def _now_ms() -> int:
    return int(time.time() * 1000)
