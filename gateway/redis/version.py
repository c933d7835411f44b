"""The oldest Redis the gateway runs on, and the check of a server against it.

The gateway needs Redis 7.0: split experiments pin a conversation's arm with ``SET key arm NX GET EX …``,
and ``SET`` takes ``NX`` together with ``GET`` only from 7.0 on. Nothing else it sends is newer than 6.2
(exclusive ``(`` ranges in ``XRANGE``/``XREVRANGE``); scripts use only commands older than that.

Valkey reports ``redis_version`` as the Redis release it is compatible with (7.2.4 for every Valkey so far)
and its own release as ``valkey_version``; every Valkey (7.2 and later) meets the minimum. A server is judged
by ``redis_version`` and named by its own release.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import redis
import structlog
from redis.exceptions import RedisError

log = structlog.get_logger("gateway.redis")
MINIMUM: tuple[int, int] = (7, 0)
MINIMUM_TEXT = "Redis 7.0 or later (or any Valkey, 7.2 or later)"
REASON = "split experiments pin a conversation's arm with SET … NX GET, which Redis accepts from 7.0 on"


class RedisVersionError(RuntimeError):
    """The server is older than the gateway needs (or its version cannot be read from INFO)."""


@dataclass(frozen=True, slots=True)
class ServerVersion:
    name: str
    """``Redis``, or ``Valkey`` when the server says so."""
    release: str
    """The server's own release: ``valkey_version`` for Valkey, else ``redis_version``."""
    compatible: tuple[int, ...]
    """``redis_version`` as numbers: the Redis release whose commands the server accepts."""

    def __str__(self) -> str:
        return f"{self.name} {self.release}"

    def meets(self, minimum: tuple[int, ...] = MINIMUM) -> bool:
        return self.compatible >= minimum


def parse_version(text: str) -> tuple[int, ...]:
    """``"7.0.15"`` → ``(7, 0, 15)``; a part that is not a number ends it (``"7.2.4-rc1"`` → ``(7, 2)``)."""
    numbers: list[int] = []
    for part in text.strip().split("."):
        if not part.isdigit():
            break
        numbers.append(int(part))
    if not numbers:
        raise RedisVersionError(f"cannot read a version from {text!r}")
    return tuple(numbers)


def server_version(info: Mapping[str, object]) -> ServerVersion:
    """The version in ``INFO server``'s fields (as redis-py parses them)."""
    reported = info.get("redis_version")
    if reported is None:
        raise RedisVersionError("INFO server has no redis_version field")
    own = info.get("valkey_version")
    valkey = own is not None or str(info.get("server_name", "")).lower() == "valkey"
    return ServerVersion(
        name="Valkey" if valkey else "Redis",
        release=str(own if own is not None else reported),
        compatible=parse_version(str(reported)),
    )


def refusal(version: ServerVersion, *, where: str, minimum: tuple[int, ...] = MINIMUM) -> str | None:
    """Why the gateway will not run on this server, or None when it meets the minimum."""
    if version.meets(minimum):
        return None
    if minimum == MINIMUM:
        return f"{where} is {version}; the gateway needs {MINIMUM_TEXT}: {REASON}"
    return f"{where} is {version}; the gateway needs Redis {'.'.join(map(str, minimum))} or later"


def read_version(url: str, *, timeout: float = 3.0) -> ServerVersion:
    """Ask the server at ``url`` (any node, for a cluster) for its version. Raises ``RedisError`` or
    ``OSError`` when it cannot be asked, ``RedisVersionError`` when the answer names no version."""
    client = redis.Redis.from_url(url, socket_timeout=timeout, socket_connect_timeout=timeout, retry=None)
    try:
        info = client.info("server")
    finally:
        client.close()
    return server_version(info)


def require(url: str, *, where: str, minimum: tuple[int, ...] = MINIMUM) -> ServerVersion:
    """The server's version; ``RedisVersionError`` (with the minimum and the reason) when it is too old."""
    version = read_version(url)
    problem = refusal(version, where=where, minimum=minimum)
    if problem is not None:
        raise RedisVersionError(problem)
    return version


def check_configured(url: str, *, where: str = "the Redis at GATEWAY_REDIS_URL") -> ServerVersion | None:
    """At start, the version of the server the gateway is pointed at; ``RedisVersionError`` when it is too
    old. A server that cannot be asked now (down, slow, or INFO not allowed) is not refused: the gateway
    starts (``/readyz`` says whether Redis answers), and a warning says the version went unchecked."""
    try:
        version = read_version(url)
    except (RedisError, OSError, RedisVersionError) as exc:
        log.warning("redis_version_unchecked", error=type(exc).__name__, detail=str(exc)[:200])
        return None
    problem = refusal(version, where=where)
    if problem is not None:
        raise RedisVersionError(problem)
    log.info("redis_version", server=str(version))
    return version
