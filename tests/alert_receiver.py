"""A webhook receiver process for alert tests: records what it is sent; can fail or hold deliveries.

``python -m tests.alert_receiver`` prints ``port <n>`` once it listens. ``POST /hook`` records the JSON
body; ``POST /behave`` with ``{"fail": n, "hold": bool}`` makes the next n deliveries answer 500, and holds
every delivery unanswered until ``POST /release``; ``GET /received`` answers what was recorded and how many
deliveries are being held.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from aiohttp import web


def build() -> web.Application:
    state: dict[str, Any] = {"received": [], "fail": 0, "held": 0, "release": asyncio.Event()}
    state["release"].set()

    async def hook(request: web.Request) -> web.Response:
        body = await request.json()
        if state["fail"] > 0:
            state["fail"] -= 1
            return web.json_response({"error": "failing on purpose"}, status=500)
        state["received"].append(body)
        state["held"] += 1
        try:
            await state["release"].wait()
        finally:
            state["held"] -= 1
        return web.json_response({"ok": True})

    async def behave(request: web.Request) -> web.Response:
        wanted = await request.json()
        state["fail"] = int(wanted.get("fail", 0))
        if wanted.get("hold"):
            state["release"].clear()
        return web.json_response({"ok": True})

    async def release(request: web.Request) -> web.Response:
        state["release"].set()
        return web.json_response({"ok": True})

    async def received(request: web.Request) -> web.Response:
        return web.json_response({"received": state["received"], "held": state["held"]})

    app = web.Application()
    app.router.add_post("/hook", hook)
    app.router.add_post("/behave", behave)
    app.router.add_post("/release", release)
    app.router.add_get("/received", received)
    return app


async def serve() -> None:
    runner = web.AppRunner(build())
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    server = site._server
    assert server is not None
    port = server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    print(f"port {port}", flush=True)
    await asyncio.Event().wait()


@contextmanager
def receiver() -> Iterator[str]:
    """Runs the receiver process; yields its base URL."""
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.alert_receiver"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        if not line.startswith("port "):
            raise RuntimeError(f"the alert receiver did not start: {line!r}")
        yield f"http://127.0.0.1:{int(line.split()[1])}"
    finally:
        process.terminate()
        process.wait(timeout=10)


if __name__ == "__main__":
    asyncio.run(serve())
