"""Server-sent events as they arrive in chunks: whole events out, ``data:`` payloads read.

Every stream reader (chat completions, Responses, Messages) splits its upstream bytes here. Line ends are
normalised to ``\\n`` on what is buffered, so a ``\\r\\n`` cut between two chunks still ends its line.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import orjson

_DATA = b"data:"


class EventSplitter:
    def __init__(self) -> None:
        self._buffer = b""

    def feed(self, chunk: bytes) -> bytes:
        """The complete events buffered so far, each followed by its blank line (b"" when none is)."""
        buffer = self._buffer + chunk if self._buffer else chunk
        if b"\r" in buffer:
            buffer = buffer.replace(b"\r\n", b"\n")
        end = buffer.rfind(b"\n\n")
        if end < 0:
            self._buffer = buffer
            return b""
        self._buffer = buffer[end + 2 :]
        return buffer[: end + 2]

    def rest(self) -> bytes:
        """What is left when the stream ends: an unterminated last event, as received."""
        rest, self._buffer = self._buffer, b""
        return rest


def events(complete: bytes) -> list[bytes]:
    """The events of ``EventSplitter.feed``'s output, without their blank lines."""
    return [event for event in complete.split(b"\n\n") if event]


def data_of(event: bytes) -> bytes | None:
    """The event's ``data:`` payload (several ``data:`` lines joined by newlines); None without one."""
    if event.startswith(_DATA) and b"\n" not in event:  # one line, as nearly every event is
        return event[5:].strip()
    lines = [line for line in event.split(b"\n") if line.startswith(_DATA)]
    if not lines:
        return None
    if len(lines) == 1:
        return lines[0][5:].strip()
    return b"\n".join(line[5:].strip() for line in lines)


def json_of(event: bytes) -> dict[str, Any] | None:
    """The event's ``data:`` payload as a JSON object; None without one, or when it is not one."""
    payload = data_of(event)
    if not payload:
        return None
    try:
        data = orjson.loads(payload)
    except orjson.JSONDecodeError:
        return None
    return data if isinstance(data, dict) else None


def with_data(event: bytes, data: Mapping[str, Any]) -> bytes:
    """``event`` (without its blank line) with ``data`` as its ``data:`` payload; its other lines
    (``event:``, ``id:``) are kept, before it."""
    kept = [line for line in event.split(b"\n") if not line.startswith(_DATA)]
    return b"\n".join([*kept, b"data: " + orjson.dumps(data)])


def swapped(parts: list[bytes], original: bytes, replacement: bytes) -> bytes:
    """The events ``parts`` (``events``' output) whole again, ``original`` (that very object) replaced."""
    return b"".join((replacement if event is original else event) + b"\n\n" for event in parts)


class StampedRelay:
    """A stream reader that relays whole events: each complete event is read (``_read``, the subclass's),
    and the one a reading stamped (``_stamped``: that event and its rewritten copy, as the client gets
    it) is swapped; every other event goes out as it came."""

    def __init__(self) -> None:
        self.output_parts: list[str] = []
        self._stamped: tuple[bytes, bytes] | None = None
        self._splitter = EventSplitter()

    def feed(self, chunk: bytes) -> bytes:
        """The events complete so far, each with its blank line (b"" when none is)."""
        complete = self._splitter.feed(chunk)
        parts = events(complete)
        for event in parts:
            self._read(event)
        if self._stamped is None:
            return complete
        (original, replacement), self._stamped = self._stamped, None
        return swapped(parts, original, replacement)

    def flush(self) -> bytes:
        """What is left when the stream ends: an unterminated last event, as received unless stamped."""
        rest = self._splitter.rest()
        event = rest.strip()
        if not event:
            return rest
        self._read(event)
        stamped, self._stamped = self._stamped, None
        return rest if stamped is None else stamped[1]

    @property
    def output_text(self) -> str:
        return "".join(self.output_parts)

    def _read(self, event: bytes) -> None:
        raise NotImplementedError


class EventRewriter:
    """The events of a stream, whole, each passed through ``rewrite`` (for usage reported otherwise than
    the upstream reported it)."""

    def __init__(self, rewrite: Callable[[bytes], bytes]) -> None:
        self._rewrite = rewrite
        self._splitter = EventSplitter()

    def feed(self, chunk: bytes) -> bytes:
        complete = self._splitter.feed(chunk)
        return b"".join(self._rewrite(event) + b"\n\n" for event in events(complete))

    def rest(self) -> bytes:
        rest = self._splitter.rest()
        return self._rewrite(rest.strip()) if rest.strip() else rest
