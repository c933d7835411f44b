"""The ledger writer on a real Redis Cluster whose replica does not confirm a batch (its server stopped
with ``SIGSTOP``): the batch is written again until a replica has it, so a master killed before passing
it on loses nothing, and nothing is counted twice."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from redis.asyncio.cluster import RedisCluster
from redis.exceptions import RedisClusterException, RedisError

from gateway.config.schema.ledger import LedgerConfig
from gateway.edge.lifespan import redis_client
from gateway.fronts.responses.memory import Remembered, ResponseMemory, response_key
from gateway.ledger import LedgerReader, Period
from gateway.ledger.event import CostEvent
from gateway.ledger.writer import Ledger
from tests.cluster import Cluster, Node, names_on_every_master, redis_cluster
from tests.e2e.ledger_helpers import wait_until
from tests.gateway.test_ledger_event import NOV_30_NOON, make_event

EVENTS = 40
CONFIG = LedgerConfig(probe_interval_seconds=0.1, write_timeout_seconds=3.0, linger_seconds=0.001)
NODE_TIMEOUT_MS = 120_000
"""Longer than a test keeps a replica paused, however busy the machine: a replica the cluster marks failed
is left out of the masters' replicas, and a write to a master without one has nothing to wait for (with
4 s, a replica paused through a slow moment was marked failed, and its writes were confirmed). Set once
the cluster is up: nodes gossip every half node timeout, so a cluster made with it takes longer to agree."""
FAILOVER_NODE_TIMEOUT_MS = 4_000
"""The node timeout the cluster is made with, and what the test that kills a master sets again once its
replica's pause has shown what it must: the failover then comes within seconds."""
PERIOD = Period(NOV_30_NOON - 1000, NOV_30_NOON + EVENTS * 1000 + 1000)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with redis_cluster(
        tmp_path_factory.mktemp("lag"),
        masters=3,
        replicas_per_master=1,
        node_timeout_ms=FAILOVER_NODE_TIMEOUT_MS,
    ) as started:
        started.set_node_timeout(NODE_TIMEOUT_MS)
        yield started


@pytest.fixture
async def client(cluster: Cluster) -> AsyncIterator[RedisCluster]:
    redis = redis_client(cluster.url, cluster=True)
    assert isinstance(redis, RedisCluster)
    try:
        yield redis
    finally:
        await redis.aclose()


def tenant_on(cluster: Cluster, master: Node, prefix: str) -> str:
    names = names_on_every_master(cluster, prefix)
    return names[cluster.masters.index(master)]


def batch(tenant: str) -> list[CostEvent]:
    return [make_event(number, id=f"{tenant}-{number}", tenant=tenant) for number in range(EVENTS)]


async def ledger_ids(redis: RedisCluster, tenant: str) -> list[str]:
    return [event.id async for event in LedgerReader(redis).events(tenant, PERIOD)]  # type: ignore[arg-type]


async def record_all(ledger: Ledger, events: list[CostEvent]) -> None:
    for event in events:
        ledger.record(event)
    async with asyncio.timeout(60):
        await ledger.drain()


@pytest.mark.anyio
async def test_a_batch_no_replica_confirmed_is_written_again_until_one_does(
    cluster: Cluster, client: RedisCluster, tmp_path: Path
) -> None:
    master = cluster.masters[1]
    tenant = tenant_on(cluster, master, f"lag-{time.time_ns()}")
    events = batch(tenant)
    async with Ledger(client, spool_dir=tmp_path, config=CONFIG) as ledger:  # type: ignore[arg-type]
        with cluster.paused(cluster.replica_of(master)):
            await record_all(ledger, events)
            assert ledger.stats().unconfirmed == EVENTS

        async def confirmed() -> str | None:
            left = ledger.stats().unconfirmed
            return None if left == 0 else f"{left} events unconfirmed"

        await wait_until(confirmed, timeout=30)
        stats = ledger.stats()
    assert (stats.applied, stats.duplicates, stats.unreplicated, stats.spooled) == (EVENTS, 0, 0, 0)
    assert sorted(await ledger_ids(client, tenant)) == sorted(event.id for event in events)


@pytest.mark.anyio
async def test_a_replica_that_never_confirms_leaves_the_events_on_their_live_master(
    cluster: Cluster, client: RedisCluster, tmp_path: Path
) -> None:
    master = cluster.masters[1]
    tenant = tenant_on(cluster, master, f"never-{time.time_ns()}")
    events = batch(tenant)
    config = CONFIG.model_copy(update={"replica_confirm_seconds": 1.0})
    with cluster.paused(cluster.replica_of(master)):
        async with Ledger(client, spool_dir=tmp_path, config=config) as ledger:  # type: ignore[arg-type]
            await record_all(ledger, events)

            async def given_up() -> str | None:
                stats = ledger.stats()
                return None if stats.unreplicated == EVENTS else f"{stats.unconfirmed} events unconfirmed"

            await wait_until(given_up, timeout=30)
            assert ledger.stats().unconfirmed == 0
    assert sorted(await ledger_ids(client, tenant)) == sorted(event.id for event in events)


@pytest.mark.anyio
async def test_unconfirmed_events_at_close_are_spooled_and_replayed_once(
    cluster: Cluster, client: RedisCluster, tmp_path: Path
) -> None:
    master = cluster.masters[1]
    tenant = tenant_on(cluster, master, f"close-{time.time_ns()}")
    events = batch(tenant)
    with cluster.paused(cluster.replica_of(master)):
        ledger = Ledger(client, spool_dir=tmp_path, config=CONFIG)  # type: ignore[arg-type]
        await ledger.start()
        await record_all(ledger, events)
        await ledger.close(timeout=1.0)
        assert ledger.stats().spooled == EVENTS
    async with Ledger(client, spool_dir=tmp_path, config=CONFIG) as again:  # type: ignore[arg-type]

        async def replayed() -> str | None:
            stats = again.stats()
            return None if not stats.spool_pending and stats.unconfirmed == 0 else "spool pending"

        await wait_until(replayed, timeout=30)
        assert again.stats().duplicates == EVENTS  # applied before: the replay counts nothing twice
    assert sorted(await ledger_ids(client, tenant)) == sorted(event.id for event in events)


@pytest.mark.anyio
async def test_a_remembered_response_no_replica_confirmed_is_written_again_until_one_does(
    cluster: Cluster, client: RedisCluster, tmp_path: Path
) -> None:
    master = cluster.masters[1]
    tenant = tenant_on(cluster, master, f"resp-{time.time_ns()}")
    memory = ResponseMemory(client, spool_dir=tmp_path)  # type: ignore[arg-type]
    memory.start()
    try:
        with cluster.paused(cluster.replica_of(master)):
            for number in range(5):
                assert await memory.remember(tenant, f"resp_{number}", Remembered("mock", "gpt-5.4", 10, 2))
            assert len(memory.unwritten) == 5  # on the master only: kept, and written again

        async def confirmed() -> str | None:
            return None if len(memory.unwritten) == 0 else f"{len(memory.unwritten)} values held"

        await wait_until(confirmed, timeout=30)
        assert memory.unreplicated == 0
        for number in range(5):
            assert await memory.recall(tenant, f"resp_{number}") == Remembered("mock", "gpt-5.4", 10, 2)
    finally:
        await memory.aclose()


@pytest.mark.anyio
async def test_a_master_killed_before_its_replica_had_the_writes_loses_no_event_and_no_response(
    cluster: Cluster, client: RedisCluster, tmp_path: Path
) -> None:
    """Last in this module: the master it kills stays dead."""
    master = cluster.masters[2]
    tenant = tenant_on(cluster, master, f"kill-{time.time_ns()}")
    events = batch(tenant)
    memory = ResponseMemory(client, spool_dir=tmp_path / "responses")  # type: ignore[arg-type]
    memory.start()
    remembered = Remembered("mock", "gpt-5.4", 10, 2)
    ids = [f"resp_{number}" for number in range(5)]
    try:
        async with Ledger(client, spool_dir=tmp_path / "ledger", config=CONFIG) as ledger:  # type: ignore[arg-type]
            with cluster.paused(cluster.replica_of(master), cut_from=master):
                for event in events:
                    ledger.record(event)
                written = [memory.remember(tenant, response_id, remembered) for response_id in ids]
                async with asyncio.timeout(60):
                    _, *kept = await asyncio.gather(ledger.drain(), *written)
                assert all(kept)
                assert ledger.stats().unconfirmed == EVENTS
                cluster.set_node_timeout(FAILOVER_NODE_TIMEOUT_MS, without=[cluster.replica_of(master)])
                cluster.kill(master)  # the replica never got them: the promoted one lacks them
            cluster.set_node_timeout(FAILOVER_NODE_TIMEOUT_MS, without=[master])
            cluster.wait_healthy(without=[master])

            async def all_there() -> str | None:
                try:
                    found = await ledger_ids(client, tenant)
                    stored = [await client.get(response_key(tenant, response_id)) for response_id in ids]
                except (RedisError, RedisClusterException) as exc:  # the client still learning the new master
                    return f"unreadable: {exc!r}"
                left = ledger.stats().unconfirmed
                if sorted(found) == sorted(event.id for event in events) and left == 0 and all(stored):
                    return None
                in_redis = sum(1 for value in stored if value)
                return (
                    f"{len(found)} of {EVENTS} events, {left} unconfirmed; {in_redis} of {len(ids)} responses"
                )

            await wait_until(all_there, timeout=60)
    finally:
        await memory.aclose()
