"""The upstream transport over aiohttp, against a real socket server: a whole answer read in one call, a
stream as it comes, and a body that breaks off or stalls is the same httpx error either way (a read error
of the attempt, which ``send`` retries)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest

from gateway.config.schema.root import ProviderConfig
from gateway.upstream.clients import UpstreamClient, default_client
from gateway.upstream.extensions import WHOLE_BODY
from gateway.upstream.transport import UpstreamTransport

pytestmark = pytest.mark.anyio

BODY = b'{"id":"chatcmpl-1","object":"chat.completion","choices":[]}'


OK = b"HTTP/1.1 200 OK\r\nconnection: close\r\n"
JSON = b"content-type: application/json\r\n"
PARTIAL = OK + JSON + b'content-length: 100\r\n\r\n{"id":'
"""A head that promises 100 bytes, and the first few of them."""


async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    length = next(int(line.split(b":", 1)[1]) for line in lines if line.lower().startswith(b"content-length"))
    await reader.readexactly(length)
    path = head.split(b" ", 2)[1]
    if path.startswith(b"http://"):  # asked as a proxy is: answer it, saying so
        writer.write(OK + JSON + b"x-via: proxy\r\ncontent-length: %d\r\n\r\n%s" % (len(BODY), BODY))
    elif path == b"/v1/whole":
        writer.write(OK + JSON + b"x-request-id: up-1\r\ncontent-length: %d\r\n\r\n%s" % (len(BODY), BODY))
    elif path == b"/v1/chunked":
        writer.write(OK + b"content-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
        for part in (b"data: 1\n\n", b"data: 2\n\n"):
            writer.write(b"%x\r\n%s\r\n" % (len(part), part))
            await writer.drain()
        writer.write(b"0\r\n\r\n")
    elif path == b"/v1/cut":
        writer.write(PARTIAL)
    elif path == b"/v1/stall":
        writer.write(PARTIAL)
        await writer.drain()
        await asyncio.sleep(5)
    await writer.drain()
    writer.close()


@pytest.fixture
async def base_url() -> AsyncIterator[str]:
    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        yield f"http://127.0.0.1:{port}/v1"


def client_for(base_url: str, read_timeout: float = 10.0) -> httpx.AsyncClient:
    provider = ProviderConfig.model_validate({"base_url": base_url, "timeouts": {"read": read_timeout}})
    client = default_client(provider, transport="aiohttp")
    assert isinstance(client._transport, UpstreamTransport)
    return client


def request(client: httpx.AsyncClient, url: str, *, whole: bool) -> httpx.Request:
    return httpx.Request(
        "POST", url, content=b"{}", extensions={"timeout": client.timeout.as_dict(), WHOLE_BODY: whole}
    )


@pytest.mark.parametrize("whole", [True, False])
async def test_an_answer_is_the_same_read_whole_or_as_a_stream(base_url: str, whole: bool) -> None:
    client = client_for(base_url)
    try:
        for _ in range(3):  # the parsed URL and the timeout are kept: the same answer each time
            response = await client.send(request(client, f"{base_url}/whole", whole=whole), stream=True)
            assert await response.aread() == BODY
            await response.aclose()
            assert response.status_code == 200
            assert response.headers["x-request-id"] == "up-1"
            assert response.headers["content-type"] == "application/json"
            assert response.extensions["reason_phrase"] == b"OK"
    finally:
        await client.aclose()


async def test_a_stream_comes_in_its_chunks(base_url: str) -> None:
    client = client_for(base_url)
    try:
        response = await client.send(request(client, f"{base_url}/chunked", whole=False), stream=True)
        assert b"".join([chunk async for chunk in response.aiter_raw()]) == b"data: 1\n\ndata: 2\n\n"
        await response.aclose()
    finally:
        await client.aclose()


@pytest.mark.parametrize("whole", [True, False])
@pytest.mark.parametrize(
    ("path", "error"),
    [("/cut", httpx.ReadError), ("/stall", httpx.TimeoutException)],
    ids=["breaks off: a read error", "stalls: a read timeout"],
)
async def test_a_body_that_breaks_off_or_stalls_fails_the_attempt(
    base_url: str, whole: bool, path: str, error: type[Exception]
) -> None:
    client = client_for(base_url, read_timeout=0.3)
    try:
        with pytest.raises(error):
            response = await client.send(request(client, f"{base_url}{path}", whole=whole), stream=True)
            try:
                await response.aread()
            finally:
                await response.aclose()
    finally:
        await client.aclose()


async def test_a_request_goes_straight_to_the_transport_and_answers_as_send_does(
    base_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    client = client_for(base_url)
    assert isinstance(client, UpstreamClient)

    async def not_called(*args: object, **kwargs: object) -> httpx.Response:
        raise AssertionError("send_upstream went through send")

    monkeypatch.setattr(client, "send", not_called)
    try:
        response = await client.send_upstream(request(client, f"{base_url}/whole", whole=True))
        assert (await response.aread(), response.request.url.path) == (BODY, "/v1/whole")
        await response.aclose()
        broken = request(client, f"{base_url}/cut", whole=True)
        with pytest.raises(httpx.ReadError) as failed:
            await client.send_upstream(broken)
        assert failed.value.request is broken
    finally:
        await client.aclose()


async def test_a_proxy_from_the_environment_is_still_used(
    base_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # httpx's own transport takes proxies from the environment (given a transport, httpx takes none):
    # then the client's mounts stand between, and the request goes through ``send``
    proxy = base_url.removesuffix("/v1")  # the same server answers a proxy's requests, saying so
    monkeypatch.setenv("HTTP_PROXY", proxy)
    for name in ("NO_PROXY", "no_proxy", "http_proxy"):
        monkeypatch.delenv(name, raising=False)
    upstream = "http://upstream.invalid/v1"  # only the proxy can reach it
    client = default_client(ProviderConfig(base_url=upstream), transport="httpx")
    assert isinstance(client, UpstreamClient)
    try:
        response = await client.send_upstream(request(client, f"{upstream}/whole", whole=True))
        assert await response.aread() == BODY
        assert response.headers["x-via"] == "proxy"
        await response.aclose()
    finally:
        await client.aclose()
