"""``RelayResponse``: a stream that ends sends everything and leaves no task behind; a client that goes away
mid-stream stops the stream (its iterator's ``finally`` runs, a shielded close included) and the response
returns normally; under ASGI 2.4 Starlette's own path runs."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest

from gateway.core.relay_response import RelayResponse

pytestmark = pytest.mark.anyio


def scope(spec: str = "2.3") -> dict[str, Any]:
    return {"type": "http", "asgi": {"version": "3.0", "spec_version": spec}, "method": "POST"}


class Client:
    """The server's side of one response: what was sent, and a disconnect the test lets through."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []
        self.gone = asyncio.Event()

    async def receive(self) -> dict[str, Any]:
        await self.gone.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: dict[str, Any]) -> None:
        self.sent.append(message)

    def bodies(self) -> list[bytes]:
        return [m["body"] for m in self.sent if m["type"] == "http.response.body"]


async def test_a_stream_that_ends_sends_every_chunk_and_cancels_its_watcher() -> None:
    client = Client()

    async def chunks() -> AsyncIterator[bytes]:
        for part in (b"a", b"b", b"c"):
            yield part

    before = asyncio.all_tasks()
    await RelayResponse(chunks(), media_type="text/event-stream")(scope(), client.receive, client.send)
    await asyncio.sleep(0)  # the watcher's cancellation lands
    assert client.sent[0]["type"] == "http.response.start"
    assert client.bodies() == [b"a", b"b", b"c", b""]
    assert client.sent[-1]["more_body"] is False
    assert asyncio.all_tasks() == before


async def test_a_client_that_goes_away_stops_the_stream_and_its_close_still_runs() -> None:
    client = Client()
    closed: list[str] = []
    waiting = asyncio.Event()

    async def chunks() -> AsyncIterator[bytes]:
        try:
            yield b"first"
            waiting.set()
            await asyncio.Event().wait()  # an upstream that never sends again
            yield b"never"
        finally:
            with anyio.CancelScope(shield=True):
                await asyncio.sleep(0.01)  # a shielded close, as the relays' upstream close is
                closed.append("closed")

    async def leave() -> None:
        await waiting.wait()
        client.gone.set()

    leaving = asyncio.create_task(leave())
    await RelayResponse(chunks())(scope(), client.receive, client.send)  # returns: no CancelledError
    await leaving
    assert client.bodies() == [b"first"]
    assert closed == ["closed"]


async def test_a_cancel_from_elsewhere_still_cancels_the_request() -> None:
    client = Client()
    started = asyncio.Event()

    async def chunks() -> AsyncIterator[bytes]:
        started.set()
        await asyncio.Event().wait()
        yield b"never"

    task = asyncio.create_task(RelayResponse(chunks())(scope(), client.receive, client.send))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_under_asgi_2_4_starlettes_path_runs_and_a_gone_client_is_its_disconnect() -> None:
    from starlette.requests import ClientDisconnect

    async def chunks() -> AsyncIterator[bytes]:
        yield b"a"

    async def send(message: dict[str, Any]) -> None:
        raise OSError("gone")

    async def receive() -> dict[str, Any]:
        raise AssertionError("no disconnect watch under 2.4")

    with pytest.raises(ClientDisconnect):
        await RelayResponse(chunks())(scope("2.4"), receive, send)
