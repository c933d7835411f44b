"""A drain through a Redis Cluster failover: the master holding a tenant's cost stream is killed (as
``kill -9`` would) while the ledger writes and the drainer archives; the archive ends with every event
exactly once, and its rollups count each once."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from redis.asyncio.cluster import RedisCluster
from redis.crc import key_slot

from gateway.config.schema.ledger import LedgerConfig
from gateway.edge.lifespan import redis_client
from gateway.ledger import Ledger, LedgerKeys
from gateway.ledger.archive_reader import ArchiveReader
from gateway.ledger.archive_store import ArchiveStore
from gateway.ledger.drainer import ArchiveDrainer
from gateway.ledger.period import Period
from tests.cluster import Cluster, names_on_every_master, redis_cluster
from tests.e2e.ledger_helpers import wait_until
from tests.gateway.test_ledger_event import make_event

EVENTS = 600
KILL_AFTER = 300
CHUNK = 30

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with redis_cluster(tmp_path_factory.mktemp("archive"), masters=3, replicas_per_master=1) as started:
        yield started


@pytest.mark.anyio
async def test_a_failover_during_a_drain_loses_and_doubles_no_event(
    cluster: Cluster, tmp_path: Path, archive_url: str
) -> None:
    run = uuid.uuid4().hex[:8]
    tenant = names_on_every_master(cluster, f"drain-{run}")[0]
    victim = cluster.master_of(key_slot(f"{{{tenant}}}".encode()))
    keys = LedgerKeys(f"arch-{run}")
    config = LedgerConfig(
        key_prefix=keys.prefix,
        archive=archive_url,
        archive_batch_size=40,
        archive_poll_seconds=0.05,
        probe_interval_seconds=0.1,
    )
    redis = redis_client(f"redis://{cluster.masters[1].address}/0", cluster=True)  # not the one that dies
    assert isinstance(redis, RedisCluster)
    now_ms = int(time.time() * 1000)
    events = [make_event(n, tenant=tenant, time_ms=now_ms + n) for n in range(EVENTS)]
    ledger = Ledger(redis, spool_dir=tmp_path / "spool", config=config, keys=keys)  # type: ignore[arg-type]
    drainer = ArchiveDrainer(redis, ArchiveStore(archive_url), config=config, keys=keys)  # type: ignore[arg-type]
    archive = ArchiveReader(archive_url)
    period = Period(now_ms - 1, now_ms + EVENTS + 1)

    async def archived_all() -> str | None:
        found = [event.id async for event in archive.events(tenant, period)]
        return None if sorted(found) == sorted(e.id for e in events) else f"{len(found)} of {EVENTS} archived"

    try:
        await ledger.start()
        drainer.start()
        for first in range(0, EVENTS, CHUNK):
            for event in events[first : first + CHUNK]:
                ledger.record(event)
            await asyncio.sleep(0.02)  # the drainer archives while the ledger writes
            if first + CHUNK == KILL_AFTER:
                await ledger.drain()
                cluster.kill(victim)
        await wait_until(archived_all, timeout=90)
        assert drainer.stats().archived == EVENTS
    finally:
        await drainer.close()
        await ledger.close()
        await redis.aclose()
    async with await psycopg.AsyncConnection.connect(archive_url) as connection:
        cursor = await connection.execute(
            "SELECT (SELECT count(*) FROM ledger_events WHERE tenant = %s),"
            " (SELECT sum(requests) FROM ledger_daily WHERE tenant = %s)",
            (tenant, tenant),
        )
        assert await cursor.fetchone() == (EVENTS, EVENTS)
