"""httpx over aiohttp, as ``httpx_aiohttp`` does it, with less work on every upstream call.

``httpx_aiohttp.AiohttpTransport`` turns the request's URL back into a string for aiohttp to parse again,
hands aiohttp the ``httpx.Headers`` (decoded one by one through their encoding property), builds a
``ClientTimeout`` per call, and gives every answer back as a stream of 16 KB chunks, so a whole answer is
read through four layers of async generators. This one keeps the parsed URLs and the timeouts (an upstream
has a handful of each), passes the raw header pairs, and, for a request marked ``WHOLE_BODY``, reads the
answer in one call inside the same mapping of aiohttp's errors to httpx's, so a body that breaks off is
still a read error of that attempt. Everything else (errors, streams, timeouts, proxies) is the parent's.
"""

from __future__ import annotations

from typing import Any

import aiohttp
import httpx
from httpx_aiohttp import AiohttpTransport
from httpx_aiohttp.transport import AiohttpResponseStream, map_aiohttp_exceptions
from yarl import URL

from gateway.upstream.extensions import WHOLE_BODY

HTTP_11 = {"http_version": b"HTTP/1.1"}


class UpstreamTransport(AiohttpTransport):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._urls: dict[int, tuple[httpx.URL, URL]] = {}
        self._timeouts: dict[tuple[Any, ...], aiohttp.ClientTimeout] = {}

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        session = self.client
        if not isinstance(session, aiohttp.ClientSession) or self.proxy is not None:
            return await super().handle_async_request(request)
        try:
            data: bytes | None = request.content or None
        except httpx.RequestNotRead:  # a streamed request body: the parent's path
            return await super().handle_async_request(request)
        extensions = request.extensions
        headers = [(name.decode("latin-1"), value.decode("latin-1")) for name, value in request.headers.raw]
        with map_aiohttp_exceptions():
            response = await session.request(
                request.method,
                self._url(request.url),
                headers=headers,
                data=data,
                allow_redirects=False,
                auto_decompress=False,
                compress=False,
                timeout=self._timeout(extensions.get("timeout")),
                server_hostname=extensions.get("sni_hostname"),
            ).__aenter__()
            if extensions.get(WHOLE_BODY):
                try:
                    body = await response.read()
                finally:
                    response.release()
                return httpx.Response(
                    status_code=response.status,
                    headers=response.raw_headers,
                    stream=httpx.ByteStream(body),
                    request=request,
                    extensions=_extensions(response),
                )
        return httpx.Response(
            status_code=response.status,
            headers=response.raw_headers,
            stream=AiohttpResponseStream(response),
            request=request,
            extensions=_extensions(response),
        )

    def _url(self, url: httpx.URL) -> URL:
        """aiohttp's URL of ``url``, parsed once per ``httpx.URL`` object (the calls' URLs are cached
        objects; the entry holds its key, so an id is never another object's)."""
        held = self._urls.get(id(url))
        if held is not None and held[0] is url:
            return held[1]
        if len(self._urls) >= 1024:  # a few per provider in practice; never unbounded
            self._urls.clear()
        parsed = URL(str(url))
        self._urls[id(url)] = (url, parsed)
        return parsed

    def _timeout(self, timeout: dict[str, float | None] | None) -> aiohttp.ClientTimeout:
        timeout = timeout or {}
        key = (timeout.get("connect"), timeout.get("read"), timeout.get("pool"))
        made = self._timeouts.get(key)
        if made is None:
            if len(self._timeouts) >= 64:
                self._timeouts.clear()
            made = self._timeouts[key] = aiohttp.ClientTimeout(
                sock_connect=key[0], sock_read=key[1], connect=key[2]
            )
        return made


def _extensions(response: aiohttp.ClientResponse) -> dict[str, Any]:
    if response.reason:
        return {**HTTP_11, "reason_phrase": response.reason.encode()}
    return dict(HTTP_11)
