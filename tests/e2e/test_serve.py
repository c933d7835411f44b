"""`gateway serve` with no Redis URL owns an embedded, persistent Redis server and stops it on exit."""

from __future__ import annotations

import socket
from pathlib import Path

import httpx
import redis

from tests.e2e.processes import gateway_process
from tests.factories import make_config, write_config


def test_serve_without_redis_url_runs_embedded_redis(tmp_path: Path) -> None:
    config = write_config(tmp_path / "gateway.yaml", make_config())
    socket_path = tmp_path / "data" / "redis" / "redis.sock"
    with gateway_process(config, None, tmp_path) as url:
        ready = httpx.get(f"{url}/readyz")
        assert ready.status_code == 200, ready.text
        assert socket_path.exists()
        server = redis.Redis(unix_socket_path=str(socket_path))
        assert server.config_get("appendonly") == {"appendonly": "yes"}
        assert Path(server.config_get("dir")["dir"]) == socket_path.parent
        server.close()
    with socket.socket(socket.AF_UNIX) as probe:
        try:
            probe.connect(str(socket_path))
            stopped = False
        except OSError:
            stopped = True
    assert stopped, "the embedded Redis must stop with the gateway"
