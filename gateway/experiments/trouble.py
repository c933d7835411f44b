"""Redis errors met by experiments on the request path (a split's arm read and write, the traffic counters
and pairs): never fatal to a request, never silent.

Two kinds are told apart. A connection failure or a timeout (``unreachable``) is Redis being away: the
request goes on as if the experiment had nothing stored (a split's conversation goes to the primary). Any
other error is Redis answering with one (a ``WRONGTYPE`` key, a command the server does not know, ``OOM``,
``READONLY``...), which no wait will cure: the request still goes on the same way, but the error is
logged and counted under its own name (the error code Redis sent, else the exception's class). Each is
counted in ``gateway_experiment_redis_errors_total`` every time, and logged at most once per experiment,
operation and kind every ``LOG_EVERY_SECONDS`` (with how many were not logged since), so a broken key
cannot flood the log at the request rate.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable

import structlog
from redis.exceptions import (
    AuthenticationError,
    AuthorizationError,
    ClusterDownError,
    RedisClusterException,
    RedisError,
    SlotNotCoveredError,
    TryAgainError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from gateway.redis.pipelined import WriteFailed

LOG_EVERY_SECONDS = 60.0
UNREACHABLE = "unreachable"
"""The kind of a connection failure or a timeout."""

_CODE = re.compile(r"(?:.*? of pipeline caused error: \(?['\"]?)?([A-Z][A-Z_]{1,23})(?: |$)")
"""The error code Redis sent: the message's first word, or, for a pipeline, that of the command's error."""

ErrorCount = Callable[[str, str, str], None]
"""``count(experiment, operation, kind)``: adds one to the metric."""

log = structlog.get_logger("gateway.experiments")


REDIS_FAILURES = (RedisError, RedisClusterException, OSError)
"""What a Redis call of experiments may raise (caught, then told apart by ``kind_of``)."""
_AWAY = (
    RedisConnectionError,
    RedisTimeoutError,
    ClusterDownError,
    TryAgainError,
    SlotNotCoveredError,
    OSError,
)
"""Refused, dropped, too slow, loading, or a cluster between masters: it passes by itself."""
_REFUSED = (AuthenticationError, AuthorizationError)
"""redis-py raises these as connection errors, but they are a setting to fix, not an outage."""


def is_unreachable(exc: BaseException) -> bool:
    """Redis could not be asked (refused, dropped, slow, failing over); not an answer that was an error."""
    exc = _cause(exc)
    return isinstance(exc, _AWAY) and not isinstance(exc, _REFUSED)


def kind_of(exc: BaseException) -> str:
    """``unreachable``, else the error code Redis answered with (``WRONGTYPE``, ``ERR``, ``NOSCRIPT``...),
    else the exception's class name."""
    if is_unreachable(exc):
        return UNREACHABLE
    cause = _cause(exc)
    found = _CODE.match(str(cause))
    return found.group(1) if found else type(cause).__name__


def _cause(exc: BaseException) -> BaseException:
    """A pipelined write some of whose replies failed (``WriteFailed``) is told by its first failure."""
    return exc.first if isinstance(exc, WriteFailed) else exc


class RedisTrouble:
    """Logs (rate-limited) and counts the Redis errors of experiments."""

    def __init__(
        self,
        count: ErrorCount | None = None,
        *,
        every: float = LOG_EVERY_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._count = count
        self._every = every
        self._clock = clock
        self._logged: dict[tuple[str, str, str], float] = {}
        self._unlogged: dict[tuple[str, str, str], int] = {}

    def note(self, experiment: str, operation: str, exc: BaseException, *, fallback: str) -> None:
        """``operation``: what was being done (``assign``, ``remember``, ``traffic``, ``pairs``);
        ``fallback``: what the request did instead, for the log line."""
        kind = kind_of(exc)
        if self._count is not None:
            self._count(experiment, operation, kind)
        key = (experiment, operation, kind)
        now = self._clock()
        last = self._logged.get(key)
        if last is not None and now - last < self._every:
            self._unlogged[key] = self._unlogged.get(key, 0) + 1
            return
        self._logged[key] = now
        event = "experiment_redis_unreachable" if kind == UNREACHABLE else "experiment_redis_error"
        log.warning(
            event,
            experiment=experiment,
            operation=operation,
            kind=kind,
            error=str(exc)[:200],
            fallback=fallback,
            not_logged_since=self._unlogged.pop(key, 0),
        )
