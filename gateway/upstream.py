"""Calling providers: one pooled client per provider, retries before the first byte, then fallbacks.

Classification, made once here:
- retryable: connect errors, timeouts and other transport errors, 429, 500, 502, 503, 504;
- rejected: any other 4xx, passed through with the upstream's status and body;
- exhausted: every attempt on every candidate failed; the last upstream answer is passed through.
"""

from __future__ import annotations

import email.utils
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from http.cookiejar import CookieJar, CookiePolicy

import httpx
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt
from tenacity.wait import wait_base, wait_exponential_jitter

from gateway.config import ProviderConfig
from gateway.errors import UpstreamExhausted, UpstreamRejected
from gateway.runtime import Route

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

ClientFactory = Callable[[ProviderConfig], httpx.AsyncClient]


class RetryableStatus(Exception):
    """An upstream answer worth another attempt; carries the answer for when attempts run out."""

    def __init__(self, rejected: UpstreamRejected, retry_after: float | None) -> None:
        super().__init__(f"upstream answered {rejected.status_code}")
        self.rejected = rejected
        self.retry_after = retry_after


class _NoCookies(CookiePolicy):
    netscape = True
    rfc2965 = False
    hide_cookie2 = True

    def set_ok(self, cookie: object, request: object) -> bool:
        return False

    def return_ok(self, cookie: object, request: object) -> bool:
        return False

    def domain_return_ok(self, domain: str, request: object) -> bool:
        return False

    def path_return_ok(self, path: str, request: object) -> bool:
        return False


def default_client(provider: ProviderConfig, *, transport: str = "aiohttp") -> httpx.AsyncClient:
    timeout = httpx.Timeout(
        connect=provider.timeouts.connect,
        read=provider.timeouts.read,
        write=provider.timeouts.write,
        pool=provider.timeouts.pool,
    )
    limits = httpx.Limits(max_connections=provider.max_connections, max_keepalive_connections=64)
    # Upstream cookies (load balancers set them) must never be replayed on other tenants' requests.
    cookies = CookieJar(policy=_NoCookies())
    if transport == "aiohttp":
        import aiohttp
        from httpx_aiohttp import AiohttpTransport

        def session() -> aiohttp.ClientSession:
            connector = aiohttp.TCPConnector(limit=provider.max_connections, keepalive_timeout=30)
            return aiohttp.ClientSession(connector=connector, cookie_jar=aiohttp.DummyCookieJar())

        return httpx.AsyncClient(transport=AiohttpTransport(client=session), timeout=timeout, cookies=cookies)
    return httpx.AsyncClient(timeout=timeout, limits=limits, cookies=cookies)


class UpstreamPool:
    """One pooled client per provider, opened lazily inside the app's lifespan and closed with it.

    A provider whose settings change on reload gets a new client; the old one is closed at shutdown so
    that requests still using it finish undisturbed.
    """

    def __init__(self, factory: ClientFactory) -> None:
        self._factory = factory
        self._clients: dict[str, tuple[ProviderConfig, httpx.AsyncClient]] = {}
        self._retired: list[httpx.AsyncClient] = []

    def client(self, name: str, provider: ProviderConfig) -> httpx.AsyncClient:
        held = self._clients.get(name)
        if held is not None and held[0] == provider:
            return held[1]
        if held is not None:
            self._retired.append(held[1])
        client = self._factory(provider)
        self._clients[name] = (provider, client)
        return client

    async def aclose(self) -> None:
        clients = [client for _, client in self._clients.values()] + self._retired
        self._clients.clear()
        self._retired.clear()
        for client in clients:
            await client.aclose()


class _WaitRetryAfter(wait_base):
    """Honour an upstream's Retry-After (capped); otherwise exponential backoff with jitter."""

    def __init__(self, provider: ProviderConfig) -> None:
        self._cap = provider.retry.retry_after_cap
        self._backoff = wait_exponential_jitter(
            multiplier=provider.retry.backoff_initial,
            max=provider.retry.backoff_max,
            jitter=provider.retry.backoff_initial,
        )

    def __call__(self, retry_state: RetryCallState) -> float:
        outcome = retry_state.outcome
        exc = outcome.exception() if outcome is not None else None
        if isinstance(exc, RetryableStatus) and exc.retry_after is not None:
            return min(exc.retry_after, self._cap)
        return float(self._backoff(retry_state))


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


@dataclass(slots=True)
class Exchange:
    """An upstream response whose headers have arrived (and, unless streaming, whose body too)."""

    route: Route
    response: httpx.Response
    attempts: int
    started: float


def upstream_headers(provider: ProviderConfig, incoming: Mapping[str, str]) -> dict[str, str]:
    headers = {"content-type": "application/json", "accept": incoming.get("accept", "application/json")}
    for name in ("openai-organization", "openai-project", "openai-beta", "x-stainless-helper-method"):
        if name in incoming:
            headers[name] = incoming[name]
    headers.update(provider.headers)
    if provider.api_key:
        headers["authorization"] = f"Bearer {provider.api_key}"
    return headers


async def send(
    pool: UpstreamPool,
    candidates: Sequence[Route],
    *,
    path: str,
    body_for: Callable[[Route], bytes],
    incoming_headers: Mapping[str, str],
    stream: bool,
    method: str = "POST",
) -> Exchange:
    """Send to the first candidate that answers with success; retry each, then fall back to the next.

    For a non-streaming call the body is read inside the attempt, so a connection that dies mid-body is
    retried too. For a streaming call this returns once the headers are in: nothing has gone to the
    client yet, and from then on nothing is retried.
    """
    causes: list[BaseException] = []
    last: UpstreamRejected | None = None
    total_attempts = 0
    for route in candidates:
        client = pool.client(route.provider_name, route.provider)
        url = f"{route.provider.base_url}{path}"
        headers = upstream_headers(route.provider, incoming_headers)
        body = body_for(route)
        retrying = AsyncRetrying(
            stop=stop_after_attempt(route.provider.retry.attempts),
            wait=_WaitRetryAfter(route.provider),
            retry=retry_if_exception(_retryable),
            reraise=True,
        )
        try:
            async for attempt in retrying:
                with attempt:
                    total_attempts += 1
                    started = time.perf_counter()
                    response = await _attempt(client, method, url, headers, body, stream=stream)
                    return Exchange(route, response, total_attempts, started)
        except RetryableStatus as exc:
            causes.append(exc)
            last = exc.rejected
        except httpx.TransportError as exc:
            causes.append(exc)
    names = ", ".join(route.public_model for route in candidates)
    raise UpstreamExhausted(
        f"The upstream did not answer successfully after {total_attempts} attempts ({names}).", causes, last
    )


async def _attempt(
    client: httpx.AsyncClient, method: str, url: str, headers: dict[str, str], body: bytes, *, stream: bool
) -> httpx.Response:
    request = client.build_request(method, url, headers=headers, content=body if method != "GET" else None)
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
