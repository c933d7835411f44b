"""The clients the gateway calls providers with: one pooled httpx client per provider (``UpstreamPool``),
over aiohttp by default, keeping no cookies, and sending the gateway's own requests straight to its
transport when nothing stands between (``UpstreamClient.send_upstream``)."""

from __future__ import annotations

from collections.abc import Callable

import httpx

from gateway.config.schema.root import ProviderConfig

ClientFactory = Callable[[ProviderConfig], httpx.AsyncClient]


class _NoCookies(httpx.Cookies):
    """Upstream cookies (load balancers set them) must never be replayed on other tenants' requests."""

    def extract_cookies(self, response: httpx.Response) -> None:
        return None

    def set_cookie_header(self, request: httpx.Request) -> None:
        return None


class UpstreamClient(httpx.AsyncClient):
    """An httpx client that keeps no cookies (and so spends nothing on parsing them), and sends the
    gateway's requests straight to its transport when nothing would stand between (``send_upstream``)."""

    _no_cookies = _NoCookies()

    async def send_upstream(self, request: httpx.Request) -> httpx.Response:
        """``send(request, stream=True)`` for a request the gateway built whole (its own headers, URL and
        timeout; no redirect is followed): with no proxy mounted from the environment, no auth and no
        event hooks on the client, that is one call of its transport, so this makes only that call,
        leaving out the auth flow, the redirect loop, the mounts' lookup and the stream's wrapper."""
        if self.is_closed:
            raise RuntimeError("Cannot send a request, as the client has been closed.")
        if self._mounts or self._auth is not None or any(self._event_hooks.values()):
            return await self.send(request, stream=True)
        try:
            response = await self._transport.handle_async_request(request)
        except httpx.RequestError as exc:  # as httpx tells which request failed
            exc.request = request
            raise
        response.request = request
        return response

    @property
    def cookies(self) -> httpx.Cookies:
        return self._no_cookies

    @cookies.setter
    def cookies(self, value: object) -> None:
        return None


def default_client(provider: ProviderConfig, *, transport: str = "aiohttp") -> httpx.AsyncClient:
    timeout = httpx.Timeout(
        connect=provider.timeouts.connect,
        read=provider.timeouts.read,
        write=provider.timeouts.write,
        pool=provider.timeouts.pool,
    )
    limits = httpx.Limits(max_connections=provider.max_connections, max_keepalive_connections=64)
    if transport == "aiohttp":
        import aiohttp

        from gateway.upstream.transport import UpstreamTransport

        def session() -> aiohttp.ClientSession:
            connector = aiohttp.TCPConnector(limit=provider.max_connections, keepalive_timeout=30)
            return aiohttp.ClientSession(connector=connector, cookie_jar=aiohttp.DummyCookieJar())

        return UpstreamClient(transport=UpstreamTransport(client=session), timeout=timeout)
    return UpstreamClient(timeout=timeout, limits=limits)


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
