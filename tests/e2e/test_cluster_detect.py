"""Cluster mode found by asking the node: the server and the commands open a cluster client for a Redis
Cluster node and a plain one for a standalone server, refuse a forced mode the node contradicts, read
tenants spread over every node, and /readyz fails while cost events cannot be written."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import redis
import redis.asyncio as aioredis
from redis.asyncio.cluster import RedisCluster
from redis.crc import key_slot
from redis.exceptions import ConnectionError as RedisConnectionError

from gateway.base.money import usd
from gateway.ledger import CostEvent, LedgerKeys, LedgerReader, Period
from gateway.ledger.apply import EventApplier
from gateway.ledger.period import day_of
from gateway.redis.connect import RedisMode, RedisModeError, open_redis
from gateway.redis.mode import ModeWatch
from gateway.redis.server import EmbeddedRedis
from tests.cluster import redis_cluster
from tests.e2e.processes import ROOT
from tests.e2e.test_shutdown import mock_config, serving
from tests.factories import write_config
from tests.gateway.test_ledger_event import make_event
from tests.ports import free_cluster_port, free_port

NODES = 3
CHAT = {"model": "gpt-5.4", "max_tokens": 5, "messages": [{"role": "user", "content": "Hello there"}]}


# --- a three-master cluster (tests.cluster) ------------------------------------------------------------


@pytest.fixture(scope="module")
def cluster_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with redis_cluster(tmp_path_factory.mktemp("cluster-detect"), masters=NODES) as started:
        yield started.url


@pytest.fixture
async def cluster(cluster_url: str) -> AsyncIterator[RedisCluster]:
    connection = await open_redis(cluster_url, cluster=None, must_reach=True)
    client = connection.client
    assert isinstance(client, RedisCluster)
    await client.initialize()
    try:
        yield client
    finally:
        await client.aclose()


def tenants_on_every_node(client: RedisCluster, base: str) -> list[str]:
    """``<base>-0``, ``<base>-1``, … in order, keeping the first name whose hash tag lands on each node, until
    every node holds one: the slots decide, computed, not chance."""
    wanted = {node.name for node in client.get_primaries()}
    assert len(wanted) == NODES
    chosen: dict[str, str] = {}
    for number in range(10_000):
        name = f"{base}-{number}"
        node = client.nodes_manager.get_node_from_slot(key_slot(f"{{{name}}}".encode())).name
        chosen.setdefault(node, name)
        if set(chosen) == wanted:
            return sorted(chosen.values())
    raise AssertionError("no names cover every node")


def events_of(tenants: list[str], per_tenant: int) -> list[CostEvent]:
    now_ms = int(time.time() * 1000)
    return [
        make_event(n, id=f"{tenant}-{n}", time_ms=now_ms + n, tenant=tenant, cost_nanos=1_000 * (n + 1))
        for tenant in tenants
        for n in range(per_tenant)
    ]


# --- detection -----------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_detect_opens_a_cluster_client_that_reaches_every_node(cluster: RedisCluster) -> None:
    tenants = tenants_on_every_node(cluster, "detect")
    for tenant in tenants:  # a plain client on one node would meet MOVED for two of these
        await cluster.set(f"gw:{{{tenant}}}:check", tenant)
    assert [await cluster.get(f"gw:{{{tenant}}}:check") for tenant in tenants] == [
        t.encode() for t in tenants
    ]


@pytest.mark.anyio
async def test_detect_opens_a_plain_client_for_a_standalone_server(redis_url: str) -> None:
    connection = await open_redis(redis_url, cluster=None, must_reach=True)
    try:
        assert not isinstance(connection.client, RedisCluster)
        assert connection.mode == RedisMode(cluster=False, forced=False, verified=True)
        assert await connection.client.ping()
    finally:
        await connection.client.aclose()


@pytest.mark.anyio
async def test_detect_refuses_forcing_standalone_on_a_cluster_node(cluster_url: str) -> None:
    with pytest.raises(RedisModeError) as refused:
        await open_redis(cluster_url, cluster=False, must_reach=True)
    port = cluster_url.rsplit(":", 1)[1].split("/")[0]
    assert str(refused.value).startswith(
        f"GATEWAY_REDIS_CLUSTER=false, but the Redis at 127.0.0.1:{port} is a Redis Cluster node"
    )


@pytest.mark.anyio
async def test_detect_refuses_forcing_cluster_on_a_standalone_server(redis_url: str) -> None:
    with pytest.raises(
        RedisModeError, match=r"GATEWAY_REDIS_CLUSTER=true, but the Redis at \S+ is not a cluster"
    ):
        await open_redis(redis_url, cluster=True, must_reach=True)


@pytest.mark.anyio
async def test_detect_of_a_redis_that_does_not_answer(dead_redis_url: str) -> None:
    with pytest.raises(RedisConnectionError):
        await open_redis(dead_redis_url, cluster=None, must_reach=True)
    assumed = await open_redis(dead_redis_url, cluster=None, must_reach=False)  # the server starts anyway
    forced = await open_redis(dead_redis_url, cluster=True, must_reach=False)
    try:
        assert assumed.mode == RedisMode(cluster=False, forced=False, verified=False)
        assert forced.mode == RedisMode(cluster=True, forced=True, verified=False)
        assert isinstance(forced.client, RedisCluster) and not isinstance(assumed.client, RedisCluster)
    finally:
        await assumed.client.aclose()
        await forced.client.aclose()


@pytest.mark.anyio
async def test_mode_watch_stops_a_process_that_guessed_standalone_for_a_cluster_node(
    cluster_url: str,
) -> None:
    restarts: list[str] = []
    watch = ModeWatch(
        cluster_url,
        RedisMode(cluster=False, forced=False, verified=False),
        restart=lambda: restarts.append("restart"),
        every=0.01,
    )
    assert watch.check().startswith("unverified")
    await asyncio.wait_for(watch.run(), 30)
    assert restarts == ["restart"]
    assert watch.problem is not None and "is a cluster node" in watch.problem and "stops" in watch.problem


@pytest.mark.anyio
async def test_mode_watch_verifies_once_the_server_answers(tmp_path: Path) -> None:
    port = free_port()
    watch = ModeWatch(
        f"redis://127.0.0.1:{port}/0", RedisMode(cluster=False, forced=False, verified=False), every=0.01
    )
    watching = asyncio.create_task(watch.run())
    await asyncio.sleep(0.1)  # asks, and meets a refused connection, a few times
    assert not watching.done() and watch.check().startswith("unverified")
    with EmbeddedRedis(tmp_path / "redis", port=port, persist=False):
        await asyncio.wait_for(watching, 30)
    assert watch.check() == "ok"


# --- the commands ------------------------------------------------------------------------------------


@pytest.fixture
async def spread(cluster: RedisCluster, request: pytest.FixtureRequest) -> tuple[str, list[CostEvent]]:
    """Events of tenants on every node, under a key prefix of the test's own."""
    keys = LedgerKeys(request.node.name)
    tenants = tenants_on_every_node(cluster, "spread")
    events = events_of(tenants, per_tenant=3)
    await cluster.script_flush()
    result = await EventApplier(cluster, keys=keys, retention_months=13).apply(events)  # type: ignore[arg-type]
    assert result.applied == len(events)
    return keys.prefix, events


def gateway_command(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    gateway = Path(sys.executable).parent / "gateway"
    clean = {name: value for name, value in os.environ.items() if not name.startswith("GATEWAY_")}
    return subprocess.run(
        [str(gateway), *args],
        cwd=ROOT,
        env={**clean, **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.anyio
async def test_costs_summary_of_every_tenant_across_the_nodes(
    cluster_url: str, spread: tuple[str, list[CostEvent]]
) -> None:
    prefix, events = spread
    day = day_of(events[0].time_ms)
    for period in ([], ["--from", day, "--to", day]):  # from the events; from the daily counters
        done = gateway_command(
            "costs", "summary", "--format", "json", "--key-prefix", prefix, *period,
            env={"GATEWAY_REDIS_URL": cluster_url},
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        rows = {row["tenant"]: row for row in orjson.loads(done.stdout)}
        tenants = sorted({event.tenant for event in events})
        assert sorted(rows) == tenants
        for tenant in tenants:
            mine = [event for event in events if event.tenant == tenant]
            assert rows[tenant]["requests"] == len(mine)
            assert rows[tenant]["cost_usd"] == usd(sum(event.cost_nanos for event in mine))


@pytest.mark.anyio
async def test_costs_export_of_every_tenant_across_the_nodes(
    cluster_url: str, spread: tuple[str, list[CostEvent]], tmp_path: Path
) -> None:
    prefix, events = spread
    out = tmp_path / "events.ndjson"
    done = gateway_command(
        "costs", "export", "--format", "ndjson", "--key-prefix", prefix, "--redis-url", cluster_url,
        "-o", str(out),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    exported = [orjson.loads(line) for line in out.read_bytes().splitlines()]
    assert sorted(line["id"] for line in exported) == sorted(event.id for event in events)
    assert [line["time"] for line in exported] == sorted(line["time"] for line in exported)  # merged


@pytest.mark.anyio
async def test_costs_refuses_a_forced_standalone_mode_on_a_cluster_node(
    cluster_url: str, spread: tuple[str, list[CostEvent]]
) -> None:
    prefix, _ = spread
    done = gateway_command(
        "costs", "summary", "--key-prefix", prefix,
        env={"GATEWAY_REDIS_URL": cluster_url, "GATEWAY_REDIS_CLUSTER": "false"},
    )  # fmt: skip
    assert done.returncode == 1
    assert done.stderr.startswith("gateway costs: GATEWAY_REDIS_CLUSTER=false, but the Redis at 127.0.0.1:")
    assert "Traceback" not in done.stderr


# --- the server --------------------------------------------------------------------------------------


@contextmanager
def serve(
    directory: Path, config: dict[str, Any], **env: str
) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """`gateway serve`, waited for until it answers /healthz (ready or not), stopped with SIGTERM."""
    with serving(directory, config, wait_for="/healthz", **env) as served:
        yield served


def readiness_until(url: str, wanted: int, *, timeout: float = 60.0) -> dict[str, Any]:
    """The body of the first /readyz answer with status ``wanted``."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        answer = httpx.get(f"{url}/readyz", timeout=5)
        last = answer.json()
        if answer.status_code == wanted:
            body: dict[str, Any] = last
            return body
        time.sleep(0.2)
    raise AssertionError(f"/readyz never answered {wanted} within {timeout} s; last: {last}")


def keys_of(tenants: list[str]) -> dict[str, Any]:
    return {tenant: {"keys": [f"sk-{tenant}"]} for tenant in tenants}


@pytest.mark.anyio
async def test_serve_detects_the_cluster_and_records_every_tenant(
    tmp_path: Path, mock_url: str, cluster_url: str, cluster: RedisCluster
) -> None:
    tenants = tenants_on_every_node(cluster, "serve")
    answered: dict[str, str] = {}
    with serve(tmp_path, mock_config(mock_url, keys_of(tenants)), GATEWAY_REDIS_URL=cluster_url) as (_, url):
        ready = readiness_until(url, 200)
        assert ready["checks"]["redis_mode"] == "ok" and ready["checks"]["ledger"] == "ok"
        for tenant in tenants:
            headers = {"authorization": f"Bearer sk-{tenant}"}
            response = httpx.post(f"{url}/v1/chat/completions", json=CHAT, headers=headers, timeout=30)
            assert response.status_code == 200, response.text
            answered[tenant] = response.headers["x-gateway-request-id"]
    now = int(time.time() * 1000)
    reader = LedgerReader(cluster)  # type: ignore[arg-type]
    for tenant in tenants:  # the ledger was flushed on shutdown
        found = [event.id async for event in reader.events(tenant, Period(now - 3_600_000, now + 60_000))]
        assert found == [answered[tenant]]
    assert not list((tmp_path / "data" / "spool").glob("**/*.jsonl"))


def test_serve_refuses_a_forced_standalone_mode_on_a_cluster_node(
    tmp_path: Path, mock_url: str, cluster_url: str
) -> None:
    config = write_config(tmp_path / "gateway.yaml", mock_config(mock_url, keys_of(["solo"])))
    env = {"GATEWAY_CONFIG": str(config), "GATEWAY_REDIS_URL": cluster_url, "GATEWAY_DATA_DIR": str(tmp_path)}
    done = gateway_command("serve", "--port", str(free_port()), "--no-redis-cluster", env=env)
    assert done.returncode == 2
    assert "gateway serve: GATEWAY_REDIS_CLUSTER=false, but the Redis at 127.0.0.1:" in done.stdout


def test_serve_starts_without_redis_and_is_ready_once_it_answers(tmp_path: Path, mock_url: str) -> None:
    port = free_port()
    env = {"GATEWAY_REDIS_URL": f"redis://127.0.0.1:{port}/0"}
    with serve(tmp_path / "gateway", mock_config(mock_url, keys_of(["later"])), **env) as (_, url):
        waiting = readiness_until(url, 503)
        assert waiting["checks"]["redis_mode"].startswith("unverified: Redis did not answer at start")
        with EmbeddedRedis(tmp_path / "redis", port=port, persist=False):
            ready = readiness_until(url, 200)
            assert ready["checks"]["redis_mode"] == "ok"


@contextmanager
def one_node_cluster(directory: Path, port: int) -> Iterator[EmbeddedRedis]:
    """A cluster of one master holding every slot: enough for a node to say ``cluster_enabled:1``."""
    with EmbeddedRedis(directory, port=port, persist=False, cluster=True) as node:
        client = redis.Redis(port=port)
        try:
            client.execute_command("CLUSTER", "ADDSLOTS", *range(16384))
            deadline = time.monotonic() + 30
            while client.cluster("info")["cluster_state"] != "ok":
                assert time.monotonic() < deadline, "the one-node cluster never reached cluster_state:ok"
                time.sleep(0.1)
        finally:
            client.close()
        yield node


def test_serve_that_guessed_standalone_for_a_cluster_node_stops_and_starts_right(
    tmp_path: Path, mock_url: str
) -> None:
    port = free_cluster_port()
    config = mock_config(mock_url, keys_of(["guess"]))
    env = {"GATEWAY_REDIS_URL": f"redis://127.0.0.1:{port}/0", "GATEWAY_LOG_FORMAT": "json"}
    with serve(tmp_path / "first", config, **env) as (process, url):
        assert readiness_until(url, 503)["checks"]["redis_mode"].startswith("unverified")
        with one_node_cluster(tmp_path / "node", port):
            assert process.wait(60) == 0  # stopped itself, for its supervisor to start it again
            wrong = [
                orjson.loads(line)
                for line in (tmp_path / "first" / "gateway.log").read_bytes().splitlines()
                if b'"redis_mode_wrong"' in line
            ]
            assert len(wrong) == 1 and "is a cluster node" in wrong[0]["reason"]
            with serve(tmp_path / "again", config, **env) as (_, again):
                assert readiness_until(again, 200)["checks"]["redis_mode"] == "ok"


def test_readyz_fails_while_the_ledger_cannot_write_and_recovers(tmp_path: Path, mock_url: str) -> None:
    port = free_port()
    server = EmbeddedRedis(tmp_path / "redis", port=port, persist=False)
    server.start()
    try:
        config = mock_config(mock_url, keys_of(["writer"]))
        with serve(tmp_path / "gateway", config, GATEWAY_REDIS_URL=server.url) as (_, url):
            readiness_until(url, 200)
            asyncio.run(
                _command(server.url, "CLIENT", "PAUSE", "600000", "WRITE")
            )  # PING answers; writes wait
            refused = readiness_until(url, 503)
            assert refused["checks"]["redis"].startswith("write probe failed: TimeoutError")
            headers = {"authorization": "Bearer sk-writer"}
            answered = httpx.post(f"{url}/v1/chat/completions", json=CHAT, headers=headers, timeout=30)
            assert answered.status_code == 200  # served; its event waits in the spool
            spooled = _checks_until(url, lambda checks: checks["ledger"] != "ok")
            assert spooled["ledger"].startswith("down: the ledger's writes to Redis fail")
            asyncio.run(_command(server.url, "CLIENT", "UNPAUSE"))
            _checks_until(url, lambda checks: checks["ledger"] == "ok")  # its next probe writes
            assert readiness_until(url, 200)["checks"] == {
                "config": "ok",
                "redis": "ok",
                "ledger": "ok",
                "redis_mode": "ok",
            }
            recorded = asyncio.run(_recorded_until(server.url, "writer"))  # replayed from the spool
            assert recorded == [answered.headers["x-gateway-request-id"]]
            server.stop()
            stopped = readiness_until(url, 503)
            assert "ConnectionError" in stopped["checks"]["redis"]
            server.start()
            readiness_until(url, 200)
    finally:
        server.stop()


def _checks_until(url: str, wanted: Any, *, timeout: float = 60.0) -> dict[str, str]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        checks: dict[str, str] = httpx.get(f"{url}/readyz", timeout=5).json()["checks"]
        if wanted(checks):
            return checks
        time.sleep(0.2)
    raise AssertionError(f"/readyz checks never matched within {timeout} s")


async def _command(url: str, *args: str) -> None:
    client = aioredis.Redis.from_url(url)
    try:
        await client.execute_command(*args)
    finally:
        await client.aclose()


async def _recorded_until(url: str, tenant: str, *, timeout: float = 60.0) -> list[str]:
    """The ids of ``tenant``'s events, once there is one."""
    client = aioredis.Redis.from_url(url)
    now = int(time.time() * 1000)
    period = Period(now - 3_600_000, now + 60_000)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            found = [event.id async for event in LedgerReader(client).events(tenant, period)]
            if found:
                return found
            await asyncio.sleep(0.2)
    finally:
        await client.aclose()
    raise AssertionError(f"no event of {tenant} within {timeout} s")
