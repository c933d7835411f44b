"""What a shadow call reads of its candidate's answer: at most ``limits.shadow_max_response_bytes``, read
as it arrives, and parsed so that no single step holds the event loop for long (a whole body off the loop
once it is large, a stream chunk by chunk with a pause for other work every ``YIELD_EVERY_BYTES``).

A candidate that answers more is cut there (the connection closed) and its call ends as ``Oversized``:
the client's requests in flight never wait on a huge answer being read or parsed.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Protocol, TypeVar

import anyio
import anyio.lowlevel
import httpx
import orjson

INLINE_PARSE_BYTES = 256 * 1024
"""A body up to this size is parsed on the event loop (well under a millisecond); a larger one in a
worker thread."""
YIELD_EVERY_BYTES = 256 * 1024
"""A stream read from a buffer that is always full lets other tasks run after this many bytes."""


class Oversized(Exception):
    """The candidate's answer passed the limit; ``read``: the bytes read when it was cut."""

    def __init__(self, read: int, limit: int) -> None:
        super().__init__(f"the candidate's answer passed {limit} bytes")
        self.read = read


class Reader(Protocol):
    def feed(self, chunk: bytes) -> object: ...

    def flush(self) -> object: ...


R = TypeVar("R", bound=Reader)


async def read_json(response: httpx.Response, max_bytes: int) -> tuple[Any, int]:
    """The body parsed as JSON (None when it is not JSON) and its size; the response is closed after.
    Raises ``Oversized``."""
    try:
        body = b"".join([chunk async for chunk in _within(response.aiter_bytes(), max_bytes)])
    finally:
        await response.aclose()
    if len(body) > INLINE_PARSE_BYTES:
        return await anyio.to_thread.run_sync(_parsed, body), len(body)
    return _parsed(body), len(body)


async def drain(response: httpx.Response, reader: R, max_bytes: int) -> R:
    """``reader`` once it has read the whole stream; the response is closed however it ends. Raises
    ``Oversized``."""
    since_pause = 0
    try:
        async for chunk in _within(response.aiter_raw(), max_bytes):
            reader.feed(chunk)
            since_pause += len(chunk)
            if since_pause >= YIELD_EVERY_BYTES:
                since_pause = 0
                await anyio.lowlevel.checkpoint()
        reader.flush()
    finally:
        await response.aclose()
    return reader


async def _within(chunks: AsyncIterator[bytes], max_bytes: int) -> AsyncIterator[bytes]:
    """``chunks`` as they come, until more than ``max_bytes`` have: then ``Oversized``."""
    total = 0
    async for chunk in chunks:
        total += len(chunk)
        if total > max_bytes:
            raise Oversized(total, max_bytes)
        yield chunk


def _parsed(body: bytes) -> Any:
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
