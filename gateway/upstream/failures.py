"""Why an upstream attempt failed, in words an operator can act on: refused, DNS, timeout, status.

The transports disagree on exception classes (aiohttp's adapter reports a refused connection as a
connect *timeout*), so the cause is read from the exception chain, where the operating system's error
is, before the class is trusted.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import httpx
import orjson
import structlog

from gateway.base.errors import ProviderKeyRefused, UpstreamRejected

log = structlog.get_logger("gateway.upstream")


@dataclass(frozen=True, slots=True)
class AttemptFailure:
    """One failed attempt: which model through which provider, and why."""

    model: str
    provider: str
    cause: str

    def __str__(self) -> str:
        return f"{self.model} via {self.provider}: {self.cause}"


def describe(exc: BaseException) -> str:
    """A short cause: "connection refused", "DNS lookup failed", "read timeout", "status 503", …"""
    rejected = getattr(exc, "rejected", None)
    if isinstance(rejected, UpstreamRejected):
        return f"status {rejected.status_code}"
    if isinstance(exc, UpstreamRejected):
        return f"status {exc.status_code}"
    for link in _chain(exc):
        if isinstance(link, socket.gaierror) or "Name or service not known" in str(link):
            return "DNS lookup failed"
        if isinstance(link, ConnectionRefusedError):
            return "connection refused"
        if isinstance(link, ConnectionResetError):
            return "connection reset"
    if isinstance(exc, httpx.ReadTimeout):
        return "read timeout (no answer in time)"
    if isinstance(exc, httpx.ConnectTimeout):
        return "connect timeout"
    if isinstance(exc, httpx.WriteTimeout):
        return "write timeout"
    if isinstance(exc, httpx.PoolTimeout):
        return "no free connection in the pool (pool timeout)"
    if isinstance(exc, httpx.RemoteProtocolError):
        return "the upstream closed the connection"
    if isinstance(exc, httpx.ConnectError):
        return "connect failed"
    return type(exc).__name__


def summarise(failures: Sequence[AttemptFailure]) -> str:
    """Runs of the same failure folded: "m via p: connection refused (3 times); n via q: status 503"."""
    parts: list[str] = []
    previous: AttemptFailure | None = None
    repeats = 0
    for failure in [*failures, None]:
        if failure == previous:
            repeats += 1
            continue
        if previous is not None:
            parts.append(f"{previous} ({repeats} times)" if repeats > 1 else str(previous))
        previous, repeats = failure, 1
    return "; ".join(parts)


def key_refused(rejected: UpstreamRejected, *, provider: str, key_configured: bool) -> ProviderKeyRefused:
    """The provider's 401 as what it is: its answer to the gateway's key, not to the client's (logged, with
    the provider's own error code; never its message, which may quote part of the key)."""
    upstream_code = _error_code(rejected.raw_body)
    log.warning(
        "provider_key_refused",
        provider=provider,
        status=rejected.status_code,
        upstream_code=upstream_code,
        key_configured=key_configured,
    )
    answer = f"{rejected.status_code} {upstream_code}".strip()
    why = (
        f"refused the gateway's API key for it ({answer})"
        if key_configured
        else f"answered {answer}: the gateway has no API key configured for it"
    )
    return ProviderKeyRefused(
        f"The provider {provider!r} {why}. Your own key was accepted: this is the gateway's configuration, "
        f"for its operator to fix (providers.{provider}.api_key)."
    )


def _error_code(body: bytes) -> str:
    """The code (else type) of a provider's error body, OpenAI's or Anthropic's shape; "" if none."""
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        return ""
    error = data.get("error") if isinstance(data, dict) else None
    if not isinstance(error, dict):
        return ""
    for field in ("code", "type"):
        value = error.get(field)
        if isinstance(value, str) and value.isprintable() and len(value) <= 64:
            return value
    return ""


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    link: BaseException | None = exc
    while link is not None and id(link) not in seen:
        seen.add(id(link))
        yield link
        yield from (arg for arg in link.args if isinstance(arg, BaseException))
        link = link.__cause__ or link.__context__
