"""The HTTP/1.1 protocol ``gateway serve`` speaks: uvicorn's httptools protocol, with limits on request heads.

httptools has no limit on the size of a request head and joins a header's pieces in Python (quadratic in
its size), and uvicorn has no timeout for a head or a body that stops arriving. This protocol adds them:

- a head (request line and headers) over ``max_header_bytes`` is refused with 431 ``headers_too_large``.
  Its bytes are counted *before* they reach the parser, which never sees more than the limit;
- a head with more than ``max_headers`` headers is refused the same way, before the app is started;
- a head not complete ``header_timeout`` seconds after the connection opened (first request) or after its
  first byte (later ones) is answered 408 ``request_timeout``; a connection that never sent a byte is
  closed. Idle keep-alive connections between requests are uvicorn's ``timeout_keep_alive``;
- a body that sends nothing for ``body_timeout`` seconds while the app still expects more has its
  connection closed (the app sees ``http.disconnect``); nothing is answered, a response may be under way;
- a chunked body's trailers count against the head limit the same way (431);
- malformed framing gets uvicorn's 400, as ``invalid_http``.

Every answer of its own is OpenAI's error shape with ``connection: close``; the connection is then
half-closed and what the client still sends is read and dropped for ``LINGER_SECONDS``, so that the client
reads the answer rather than a reset. Once the head is complete, a body chunk costs two flag tests and one
clock read; the timers are ``loop.call_later`` handles, left armed across requests and checked when due.
"""

from __future__ import annotations

import asyncio
import functools
from dataclasses import dataclass
from typing import Any

import httptools
import orjson
import structlog
from uvicorn.config import Config
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol
from uvicorn.server import ServerState

from gateway.config.settings import Settings

LINGER_SECONDS = 2.0
"""How long a refused connection keeps reading (and dropping) what the client still sends."""

log = structlog.get_logger("gateway.http")


@dataclass(frozen=True, slots=True)
class HttpLimits:
    max_header_bytes: int
    max_headers: int
    header_timeout: float
    body_timeout: float

    @classmethod
    def from_settings(cls, settings: Settings) -> HttpLimits:
        return cls(
            max_header_bytes=settings.max_header_bytes,
            max_headers=settings.max_headers,
            header_timeout=settings.header_timeout,
            body_timeout=settings.body_timeout,
        )


@functools.cache
def process_limits() -> HttpLimits:
    """This process's limits, read from its settings once: uvicorn builds a protocol per connection, and
    its worker processes import the protocol class by reference, so the settings are read where it runs."""
    return HttpLimits.from_settings(Settings())


def error_response(status: int, message: str, code: str, default_headers: list[tuple[bytes, bytes]]) -> bytes:
    """A complete ``connection: close`` response whose body is an OpenAI-style error."""
    body = orjson.dumps(
        {"error": {"message": message, "type": "invalid_request_error", "param": None, "code": code}}
    )
    parts = [STATUS_LINE[status]]
    for name, value in default_headers:
        parts += [name, b": ", value, b"\r\n"]
    parts += [
        b"content-type: application/json\r\n",
        b"content-length: %d\r\n" % len(body),
        b"connection: close\r\n\r\n",
        body,
    ]
    return b"".join(parts)


class RequestRefused(Exception):
    """Raised from a parser callback to stop parsing a request that has been answered already."""


class GuardedHttpToolsProtocol(HttpToolsProtocol):
    def __init__(
        self,
        config: Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
        *,
        limits: HttpLimits | None = None,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self.limits = limits if limits is not None else process_limits()
        self._reading_head = True  # between a request's end (or the connection's start) and its headers
        self._head_bytes = 0
        self._chunked = False  # the body being read is chunked
        self._framing_bytes = 0  # reads of a chunked body in a row that carried no body bytes
        self._refused = False
        self._head_timer: asyncio.TimerHandle | None = None
        self._head_started: float | None = None  # loop time the head under way began; None between requests
        self._body_timer: asyncio.TimerHandle | None = None
        self._body_seen = 0.0
        self._linger: asyncio.TimerHandle | None = None

    # Connection

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]  # as uvicorn's
        super().connection_made(transport)
        self._head_started = self.loop.time()
        self._head_timer = self.loop.call_later(self.limits.header_timeout, self._head_check)

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_timers()
        if self._linger is not None:
            self._linger.cancel()
            self._linger = None
        super().connection_lost(exc)

    def _stop_timers(self) -> None:
        for timer in (self._head_timer, self._body_timer):
            if timer is not None:
                timer.cancel()
        self._head_timer = self._body_timer = None

    def data_received(self, data: bytes) -> None:
        self._unset_keepalive_if_required()
        if not self._reading_head:  # the body: the hot path
            self._body_seen = self.loop.time()
            if self._chunked:
                self._feed_chunked(data)
            else:
                self._feed(data)
            return
        if self._refused:  # answered: drop what still comes
            return
        end = data.find(b"\r\n\r\n")
        size = len(data) if end < 0 else end + 4
        if size > self.limits.max_header_bytes - self._head_bytes:
            self._feed_head_within_limit(data)
            return
        self._head_bytes += size
        self._feed(data)

    def _feed_head_within_limit(self, data: bytes) -> None:
        """Feeds only the bytes the head may still take. When the head ends within them (its end may
        have been split across reads, or the chunk holds a body too), the rest is received as usual."""
        room = self.limits.max_header_bytes - self._head_bytes
        cycle = self.cycle
        if room > 0:
            if not self._feed(memoryview(data)[:room]):
                return  # refused or upgraded: nothing more to read here
            if self.cycle is not cycle:
                self.data_received(data[room:])
                return
        self._refuse(
            431,
            f"Request headers are larger than the gateway's limit of {self.limits.max_header_bytes:,} bytes.",
            "headers_too_large",
        )

    def _feed_chunked(self, data: bytes) -> None:
        """A chunked body's trailers are headers too, joined in Python by httptools like the head's: reads
        in a row that carry no body bytes (only chunk framing or trailers) count against the head limit."""
        cycle = self.cycle
        body = cycle.body
        held = len(body)
        if not self._feed(data) or self._reading_head:  # refused, or the message is complete
            return
        if self.cycle is not cycle or cycle.body is not body or len(body) != held:
            self._framing_bytes = 0
            return
        self._framing_bytes += len(data)
        if self._framing_bytes > self.limits.max_header_bytes:
            self._refuse(
                431,
                f"Request trailers are larger than the gateway's limit of {self.limits.max_header_bytes:,} "
                "bytes.",
                "headers_too_large",
            )

    def _feed(self, data: bytes | memoryview) -> bool:
        """Feeds the parser; False when it stopped: the request was refused, or the connection upgraded."""
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            if self._should_upgrade():
                self.handle_websocket_upgrade()
            else:
                self._unsupported_upgrade_warning()
            return False
        except httptools.HttpParserError:
            if not self._refused:
                self.send_400_response("Invalid HTTP request received.")
            return False
        return True

    # Parser callbacks

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self._head_started is None:  # a later request: the first one's head runs from connection_made
            self._head_started = self.loop.time()
            if self._head_timer is None:
                self._head_timer = self.loop.call_later(self.limits.header_timeout, self._head_check)

    def on_headers_complete(self) -> None:
        if len(self.headers) > self.limits.max_headers:
            self._refuse(
                431,
                f"Request has more headers than the gateway's limit of {self.limits.max_headers}.",
                "headers_too_large",
            )
            raise RequestRefused
        self._reading_head = False
        self._head_started = None
        cycle = self.cycle
        super().on_headers_complete()
        if self.cycle is cycle:  # an upgrade: the connection is another protocol's now
            self._stop_timers()
        else:
            self._watch_body()

    def on_chunk_header(self) -> None:
        self._chunked = True

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._reading_head = True
        self._head_bytes = 0
        self._chunked = False
        self._framing_bytes = 0

    # Timeouts

    def _head_check(self) -> None:
        """Left armed when a head completes, like the body's check: it answers 408 only to a head still
        under way ``header_timeout`` after it began, and is dropped when none is."""
        self._head_timer = None
        if self._head_started is None:
            return
        remaining = self._head_started + self.limits.header_timeout - self.loop.time()
        if remaining > 0:
            self._head_timer = self.loop.call_later(remaining, self._head_check)
            return
        if self.scope is None and not self._head_bytes:  # opened, never sent a byte
            log.debug("http_idle_connection_closed", client=self.client)
            self.transport.close()
            return
        self._refuse(
            408,
            f"The request headers did not arrive within {self.limits.header_timeout:g} seconds.",
            "request_timeout",
        )

    def _watch_body(self) -> None:
        self._body_seen = self.loop.time()
        if self._body_timer is None:
            self._body_timer = self.loop.call_later(self.limits.body_timeout, self._body_check)

    def _body_check(self) -> None:
        """Left armed when a body ends (re-arming per request costs more than a check that finds no body
        under way): it closes only a connection whose body has sent nothing for ``body_timeout``."""
        if self._reading_head:
            self._body_timer = None
            return
        now = self.loop.time()
        if self.flow.read_paused:  # the gateway stopped reading, not the client
            self._body_seen = now
        idle = now - self._body_seen
        if idle < self.limits.body_timeout:
            self._body_timer = self.loop.call_later(self.limits.body_timeout - idle, self._body_check)
            return
        self._body_timer = None
        log.info("http_body_timeout", client=self.client, seconds=self.limits.body_timeout)
        self.transport.close()

    # Answers

    def send_400_response(self, msg: str) -> None:
        self._refuse(400, msg, "invalid_http")

    def _refuse(self, status: int, message: str, code: str) -> None:
        """Answers ``status`` and closes, once. When the head of a next request (a pipelining client) is
        refused, the response under way for the one before is finished first, then the connection closes
        unanswered; when a request's body breaks after its answer started, the connection just closes."""
        if self._refused:
            return
        self._refused = True
        self._stop_timers()
        log.info("http_refused", status=status, code=code, client=self.client)
        cycle = self.cycle
        if self._reading_head:
            if cycle is not None and not cycle.response_complete:
                cycle.keep_alive = False
                return
        elif cycle.response_started:
            self.transport.close()
            return
        else:
            cycle.disconnected = True  # its app sees http.disconnect and its answer is dropped
            cycle.message_event.set()
        self.transport.write(error_response(status, message, code, self.server_state.default_headers))
        if self.transport.can_write_eof():
            self.transport.write_eof()
            self._linger = self.loop.call_later(LINGER_SECONDS, self.transport.close)
        else:
            self.transport.close()
