"""Calling providers: retries before the first byte, then fallbacks (the clients: ``upstream.clients``).

Classification, made once here:
- retryable: connect errors, timeouts and other transport errors, 429, 500, 502, 503, 504;
- rejected: any other 4xx, passed through with the upstream's status and body, but a 401: that is the
  provider refusing the gateway's own key, answered as a 502 that says so (``ProviderKeyRefused``);
- exhausted: every attempt on every candidate failed; the last upstream answer is passed through.
"""

from __future__ import annotations

import email.utils
import functools
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import anyio
import httpx
import orjson
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt
from tenacity.wait import wait_base

from gateway.base.errors import UpstreamExhausted, UpstreamInvalidAnswer, UpstreamRejected
from gateway.base.record import Attempt
from gateway.config.runtime import Route
from gateway.config.schema.root import ProviderConfig
from gateway.upstream.clients import UpstreamClient, UpstreamPool
from gateway.upstream.extensions import WHOLE_BODY
from gateway.upstream.failures import AttemptFailure, describe, key_refused, summarise
from gateway.upstream.headers import upstream_headers

RETRYABLE_STATUS = frozenset({429, 500, 502, 503, 504})
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "transfer-encoding",
        "te",
        "trailer",
        "upgrade",
        "content-length",
        "content-encoding",
        "proxy-authenticate",
        "proxy-authorization",
        "host",
    }
)


class RetryableStatus(Exception):
    """An upstream answer worth another attempt; carries the answer for when attempts run out."""

    def __init__(self, rejected: UpstreamRejected, retry_after: float | None) -> None:
        super().__init__(f"upstream answered {rejected.status_code}")
        self.rejected = rejected
        self.retry_after = retry_after


class Backoff:
    """How long to wait before retry number ``n`` (1-based): the upstream's Retry-After when it sent one
    (capped), else exponential backoff with jitter."""

    def __init__(self, provider: ProviderConfig) -> None:
        self._initial = provider.retry.backoff_initial
        self._max = provider.retry.backoff_max
        self._cap = provider.retry.retry_after_cap

    def delay(self, failure: BaseException | None, retry_number: int) -> float:
        if isinstance(failure, RetryableStatus) and failure.retry_after is not None:
            return min(failure.retry_after, self._cap)
        exponential: float = self._initial * 2 ** (retry_number - 1) + random.uniform(0, self._initial)
        return min(exponential, self._max)


class _TenacityWait(wait_base):
    """The Backoff, for the retries tenacity runs after the first (untimed) failure."""

    def __init__(self, backoff: Backoff) -> None:
        self._backoff = backoff

    def __call__(self, retry_state: RetryCallState) -> float:
        outcome = retry_state.outcome
        failure = outcome.exception() if outcome is not None else None
        return self._backoff.delay(failure, retry_state.attempt_number + 1)


def parse_retry_after(headers: httpx.Headers) -> float | None:
    milliseconds = headers.get("retry-after-ms")
    if milliseconds:
        try:
            return max(float(milliseconds) / 1000, 0.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(when.timestamp() - time.time(), 0.0)


def _retryable(exc: BaseException) -> bool:
    return isinstance(exc, RetryableStatus | httpx.TransportError)


@dataclass(frozen=True, slots=True)
class TimedOut:
    """An attempt whose request went out but whose answer did not come in time: the provider may have run
    it, and bill it, so the request records it (an estimated cost event)."""

    route: Route
    seconds: float


@dataclass(slots=True)
class Exchange:
    """An upstream response whose headers have arrived (and, unless streaming, whose body too)."""

    route: Route
    response: httpx.Response
    attempts: int
    started: float
    data: dict[str, Any] | None = None
    """The body parsed as a JSON object, when the call expected one (``send(expect_json=True)``)."""
    timed_out: tuple[TimedOut, ...] = ()


async def send(
    pool: UpstreamPool,
    candidates: Sequence[Route],
    *,
    path: str,
    body_for: Callable[[Route], bytes],
    incoming_headers: Mapping[str, str],
    stream: bool,
    method: str = "POST",
    content_type: str = "application/json",
    expect_json: bool = False,
    attempts_per_route: int | None = None,
    attempt_log: list[Attempt] | None = None,
) -> Exchange:
    """Send to the first candidate that answers with success; retry each, then fall back to the next.

    For a non-streaming call the body is read inside the attempt, so a connection that dies mid-body is
    retried too. For a streaming call this returns once the headers are in: nothing has gone to the
    client yet, and from then on nothing is retried. ``expect_json``: a success whose body is not a JSON
    object (an HTML page from a proxy, a cut body) is an upstream error, not an answer (502, not retried:
    the provider may have run the request). ``attempts_per_route``: at most this many attempts on each
    candidate, whatever its provider's ``retry.attempts`` (1: never retried, an experiment's shadow call).
    ``attempt_log``: each attempt is appended to it as it ends (a traced request's; None: none kept).
    """
    causes: list[BaseException] = []
    timed_out: list[TimedOut] = []
    failures: list[AttemptFailure] = []
    last: UpstreamRejected | None = None
    attempts = 0
    for route in candidates:
        client = pool.client(route.provider_name, route.provider)
        request = httpx.Request(
            method,
            _url(route.provider.base_url, path),
            headers=upstream_headers(route.provider, incoming_headers, content_type=content_type),
            content=body_for(route) if method != "GET" else None,
            extensions={"timeout": client.timeout.as_dict(), WHOLE_BODY: not stream},
        )
        counter = _Attempts(attempts, timed_out, failures, attempt_log)
        try:
            exchange = await _call_route(
                client, request, route, counter, stream=stream, limit=attempts_per_route
            )
        except RetryableStatus as exc:
            causes.append(exc)
            last = exc.rejected
        except httpx.TransportError as exc:
            causes.append(exc)
        except UpstreamRejected as exc:
            exc.attempts = counter.count
            if exc.status_code == 401:
                refused = key_refused(
                    exc, provider=route.provider_name, key_configured=bool(route.provider.api_key)
                )
                refused.attempts = counter.count
                raise refused from exc
            raise
        else:
            exchange.timed_out = tuple(timed_out)
            if expect_json and not stream:
                exchange.data = _json_answer(exchange, tuple(timed_out))
            return exchange
        attempts = counter.count
    raise UpstreamExhausted(
        f"The upstream did not answer successfully after {attempts} attempts: {summarise(failures)}.",
        causes,
        last,
        timed_out=tuple(timed_out),
        attempts=attempts,
        failures=tuple(failures),
    )


def _json_answer(exchange: Exchange, timed_out: tuple[TimedOut, ...]) -> dict[str, Any]:
    response = exchange.response
    try:
        data = orjson.loads(response.content)
    except orjson.JSONDecodeError:
        data = None
    if isinstance(data, dict):
        return data
    kind = response.headers.get("content-type") or "no content type"
    invalid = UpstreamInvalidAnswer(
        f"The upstream ({exchange.route.public_model}) answered {response.status_code} with a body that is "
        f"not a JSON object ({kind}, {len(response.content)} bytes).",
        timed_out=timed_out,
    )
    invalid.attempts = exchange.attempts
    raise invalid


@functools.lru_cache(maxsize=256)
def _url(base_url: str, path: str) -> httpx.URL:
    return httpx.URL(f"{base_url}{path}")


@dataclass(slots=True)
class _Attempts:
    count: int
    timed_out: list[TimedOut]
    failures: list[AttemptFailure]
    log: list[Attempt] | None = None


async def _call_route(
    client: httpx.AsyncClient,
    request: httpx.Request,
    route: Route,
    attempts: _Attempts,
    *,
    stream: bool,
    limit: int | None = None,
) -> Exchange:
    """All attempts on one candidate (its provider's ``retry.attempts``, at most ``limit``); the first one
    runs without any retry machinery (the common case)."""
    allowed = route.provider.retry.attempts if limit is None else min(limit, route.provider.retry.attempts)

    async def once() -> Exchange:
        attempts.count += 1
        started = time.perf_counter()
        try:
            response = await _attempt(client, request, stream=stream)
        except (RetryableStatus, httpx.TransportError, UpstreamRejected) as exc:
            if not isinstance(exc, UpstreamRejected):
                if isinstance(exc, httpx.ReadTimeout):
                    attempts.timed_out.append(TimedOut(route, time.perf_counter() - started))
                failure = AttemptFailure(route.public_model, route.provider_name, describe(exc))
                attempts.failures.append(failure)
            if attempts.log is not None:
                attempts.log.append(_logged(route, started, exc))
            raise
        if attempts.log is not None:
            attempts.log.append(_logged(route, started, response.status_code))
        return Exchange(route, response, attempts.count, started)

    try:
        return await once()
    except (RetryableStatus, httpx.TransportError) as first:
        if allowed == 1:
            raise
        backoff = Backoff(route.provider)
        await anyio.sleep(backoff.delay(first, 1))
    async for attempt in AsyncRetrying(
        stop=stop_after_attempt(allowed - 1),
        wait=_TenacityWait(backoff),
        retry=retry_if_exception(_retryable),
        reraise=True,
    ):
        with attempt:
            return await once()
    raise AssertionError("unreachable: tenacity re-raises the last failure")


def _logged(route: Route, started: float, outcome: int | Exception) -> Attempt:
    """An attempt as a traced request keeps it: the answer's status, or for a failure the upstream's
    status, else the transport error's class."""
    status, error = (outcome, None) if isinstance(outcome, int) else _failure_of(outcome)
    model, provider, ended = route.upstream_model, route.provider_name, time.perf_counter()
    return Attempt(route.public_model, model, provider, started, ended, status, error)


def _failure_of(exc: Exception) -> tuple[int, str]:
    rejected = exc.rejected if isinstance(exc, RetryableStatus) else exc
    status = rejected.status_code if isinstance(rejected, UpstreamRejected) else 0
    return status, str(status) if status else type(exc).__name__


async def _attempt(client: httpx.AsyncClient, request: httpx.Request, *, stream: bool) -> httpx.Response:
    if isinstance(client, UpstreamClient):
        response = await client.send_upstream(request)
    else:
        response = await client.send(request, stream=True)
    if response.status_code < 400:
        if not stream:
            try:
                await response.aread()
            finally:
                await response.aclose()
        return response
    try:
        payload = await response.aread()
    finally:
        await response.aclose()
    rejected = UpstreamRejected(response.status_code, payload, response.headers.get("content-type"))
    if response.status_code in RETRYABLE_STATUS:
        raise RetryableStatus(rejected, parse_retry_after(response.headers))
    raise rejected
