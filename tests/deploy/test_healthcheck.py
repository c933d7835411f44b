"""The Dockerfile's HEALTHCHECK command, run for real against a local HTTP server in the gateway's place."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.deploy.dockerfile import Dockerfile
from tests.deploy.healthcheck import run_healthcheck
from tests.ports import free_port


@contextmanager
def answering(status: int) -> Iterator[tuple[int, list[str]]]:
    """A server on 127.0.0.1 that answers every GET with ``status``; yields its port and the paths asked."""
    paths: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            paths.append(self.path)
            self.send_response(status)
            self.send_header("content-length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, format: str, *args: object) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], paths
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.mark.parametrize(("status", "healthy"), [(200, True), (204, True), (500, False), (503, False)])
def test_healthcheck_passes_only_on_a_2xx_from_healthz(
    dockerfile: Dockerfile, status: int, healthy: bool
) -> None:
    with answering(status) as (port, paths):
        code = run_healthcheck(dockerfile, port)
    assert paths == ["/healthz"]
    assert (code == 0) is healthy


def test_healthcheck_fails_when_nothing_listens(dockerfile: Dockerfile) -> None:
    assert run_healthcheck(dockerfile, free_port()) != 0
