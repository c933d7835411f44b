"""Server-sent events as they arrive in chunks: whole events out, ``data:`` payloads read.

Both stream readers (chat completions, Responses) split their upstream bytes here. Line ends are
normalised to ``\\n`` on what is buffered, so a ``\\r\\n`` cut between two chunks still ends its line.
"""

from __future__ import annotations

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
    lines = [line for line in event.split(b"\n") if line.startswith(_DATA)]
    if not lines:
        return None
    if len(lines) == 1:
        return lines[0][5:].strip()
    return b"\n".join(line[5:].strip() for line in lines)
