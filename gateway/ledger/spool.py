"""The local spool: append-only JSON-lines segment files that hold events while Redis cannot take them.

Each ledger appends to its own active segment and holds an exclusive ``flock`` on every segment it owns,
so several gateway processes can share one spool directory. A segment whose lock nobody holds belongs to
a process that died: the next ledger to start claims it and replays it. Replaying seals the active
segment (new events go to a fresh one), applies the sealed segments in order and deletes each one only
after all of its events are in Redis; a crash mid-replay leaves the segment to be replayed again, which
the idempotent apply script makes harmless.

Lines that cannot be parsed (a write torn by a crash) and events Redis refuses for good go to
``rejected.jsonl`` next to the segments, with the reason: set aside for a person, never silently lost.
"""

from __future__ import annotations

import fcntl
import os
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import orjson

SUFFIX = ".jsonl"
REJECTED = "rejected.jsonl"


@dataclass(frozen=True, slots=True)
class Segment:
    path: Path
    fd: int


class Spool:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._lock = threading.Lock()
        self._active: Segment | None = None
        self._active_bytes = 0
        self._sealed: list[Segment] = []
        self._unsynced = False

    def claim_orphans(self) -> int:
        """Take over the segments no live process holds; returns how many were claimed."""
        self.directory.mkdir(parents=True, exist_ok=True)
        owned = {segment.path for segment in self._owned()}
        claimed = 0
        for path in sorted(self.directory.glob(f"*{SUFFIX}")):
            if path.name == REJECTED or path in owned:
                continue
            try:
                fd = os.open(path, os.O_RDWR | os.O_APPEND)
            except FileNotFoundError:
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            if not path.exists():  # replayed and deleted by its owner between glob and lock
                self._release(Segment(path, fd))
                continue
            self._sealed.append(Segment(path, fd))
            claimed += 1
        return claimed

    @property
    def pending(self) -> bool:
        return bool(self._sealed) or self._active_bytes > 0

    @property
    def unsynced(self) -> bool:
        return self._unsynced

    def append(self, lines: Sequence[bytes], *, sync: bool = True) -> None:
        """Append lines (thread-safe); with ``sync`` they are on disk when this returns."""
        data = b"".join(line + b"\n" for line in lines)
        with self._lock:
            segment = self._active or self._open_segment()
            written = 0
            while written < len(data):
                written += os.write(segment.fd, data[written:])
            self._active_bytes += len(data)
            self._unsynced = True
        if sync:
            self.sync()

    def sync(self) -> None:
        with self._lock:
            segment, unsynced, self._unsynced = self._active, self._unsynced, False
        if segment is not None and unsynced:
            os.fsync(segment.fd)

    def seal(self) -> list[Segment]:
        """Close the active segment to appends and return every segment waiting for replay, oldest first."""
        with self._lock:
            if self._active is not None and self._active_bytes > 0:
                os.fsync(self._active.fd)
                self._sealed.append(self._active)
                self._active, self._active_bytes = None, 0
            return sorted(self._sealed, key=lambda segment: segment.path.name)

    def read(self, segment: Segment, *, batch: int) -> Iterator[list[bytes]]:
        """The segment's lines in order, ``batch`` at a time."""
        lines: list[bytes] = []
        with open(segment.path, "rb") as handle:
            for raw in handle:
                line = raw.rstrip(b"\n")
                if line:
                    lines.append(line)
                if len(lines) >= batch:
                    yield lines
                    lines = []
        if lines:
            yield lines

    def discard(self, segment: Segment) -> None:
        """The segment is fully replayed: delete it, then give up its lock."""
        with self._lock:
            segment.path.unlink(missing_ok=True)
            self._sealed.remove(segment)
            self._release(segment)

    def reject(self, line: bytes, reason: str) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        record = orjson.dumps({"reason": reason, "line": line.decode("utf-8", "replace")})
        with self._lock, open(self.directory / REJECTED, "ab") as handle:
            handle.write(record + b"\n")
            handle.flush()
            os.fsync(handle.fileno())

    def close(self) -> None:
        """Sync and unlock everything; an empty active segment is removed, anything else stays for replay."""
        with self._lock:
            segments, self._sealed = [*self._sealed, *([self._active] if self._active else [])], []
            active, empty = self._active, self._active_bytes == 0
            self._active, self._active_bytes = None, 0
        for segment in segments:
            if segment is active and empty:
                segment.path.unlink(missing_ok=True)
            else:
                os.fsync(segment.fd)
            self._release(segment)

    def _owned(self) -> list[Segment]:
        return [*self._sealed, *([self._active] if self._active else [])]

    def _open_segment(self) -> Segment:
        """Create under a temporary name, lock, then rename: no other process can claim it unlocked."""
        self.directory.mkdir(parents=True, exist_ok=True)
        name = f"{time.time_ns():020d}-{os.getpid()}"
        temporary = self.directory / f"{name}.tmp"
        fd = os.open(temporary, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX)
        path = temporary.rename(self.directory / f"{name}{SUFFIX}")
        self._active, self._active_bytes = Segment(path, fd), 0
        return self._active

    @staticmethod
    def _release(segment: Segment) -> None:
        fcntl.flock(segment.fd, fcntl.LOCK_UN)
        os.close(segment.fd)
