"""Redis Cluster: a real three-node cluster started from the server binary; the ledger, budgets,
sampler and caches work on it (every multi-key operation stays in one slot), and so does `gateway serve`
with GATEWAY_REDIS_CLUSTER."""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from pathlib import Path

import httpx
import pytest
from redis.asyncio.cluster import RedisCluster

from gateway.base.errors import BudgetExceeded
from gateway.core.cache import RedisCache
from gateway.edge.lifespan import redis_client
from gateway.keys.store import KeyStore
from gateway.ledger import (
    BudgetConfig,
    Budgets,
    CostEvent,
    KeyBudget,
    Ledger,
    LedgerKeys,
    LedgerReader,
    Period,
)
from gateway.ledger.period import day_of
from gateway.ledger.reply import integer
from gateway.sampling.keys import SamplingKeys
from gateway.sampling.store import Entry, append
from tests.cluster import Cluster, names_on_every_master, redis_cluster
from tests.e2e.test_shutdown import mock_config, serving
from tests.factories import TENANT_KEY
from tests.gateway.test_ledger_event import make_event

NODES = 3


@pytest.fixture(scope="module")
def made_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with redis_cluster(tmp_path_factory.mktemp("cluster"), masters=NODES) as started:
        yield started


@pytest.fixture(scope="module")
def cluster_url(made_cluster: Cluster) -> str:
    return made_cluster.url


@pytest.fixture
async def cluster(cluster_url: str) -> AsyncIterator[RedisCluster]:
    client = redis_client(cluster_url, cluster=True)
    assert isinstance(client, RedisCluster)
    await client.initialize()  # learn the slots (the gateway's client does it on its first command)
    try:
        yield client
    finally:
        await client.aclose()


@pytest.fixture
def tenants(made_cluster: Cluster) -> list[str]:
    """Tenant names on every node, four each, chosen by their slot (a run of their own: unique)."""
    names = names_on_every_master(made_cluster, f"t-{uuid.uuid4().hex[:8]}", per_master=4)
    assert len(names) == 4 * NODES
    return names


def event(tenant: str, number: int, *, cost: int = 1_000) -> CostEvent:
    """An event of ``tenant`` now, costing ``cost`` nano-dollars, with the id ``<tenant>-<number>``."""
    now_ms = int(time.time() * 1000)
    return make_event(
        number,
        id=f"{tenant}-{number}",
        time_ms=now_ms,
        tenant=tenant,
        cost_nanos=cost,
        counterfactual_nanos=cost,
    )


def this_hour() -> Period:
    now = int(time.time() * 1000)
    return Period(now - 3_600_000, now + 3_600_000)


@pytest.mark.anyio
async def test_cluster_ledger_applies_batches_that_span_every_node(
    cluster: RedisCluster, tmp_path: Path, tenants: list[str]
) -> None:
    await cluster.script_flush()  # the first apply meets NOSCRIPT on every node and loads the script
    async with Ledger(cluster, spool_dir=tmp_path / "spool") as ledger:  # type: ignore[arg-type]
        for number in range(5):
            for tenant in tenants:
                ledger.record(event(tenant, number))
        ledger.record(event(tenants[0], 0))  # a duplicate: counted once
        await ledger.drain()
        stats = ledger.stats()
    assert (stats.applied, stats.duplicates, stats.spooled) == (5 * len(tenants), 1, 0)
    reader = LedgerReader(cluster)  # type: ignore[arg-type]
    keys = LedgerKeys()
    for tenant in tenants:
        found = [found async for found in reader.events(tenant, this_hour())]
        assert sorted(e.id for e in found) == sorted(f"{tenant}-{n}" for n in range(5))
        usage = await reader.usage(tenant, now_ms=int(time.time() * 1000))
        assert usage.today.cost_nanos == 5_000
        assert integer(await cluster.hget(keys.daily(tenant, day_of(found[0].time_ms)), "requests")) == 5
    assert set(tenants) <= set(await reader.tenants())


@pytest.mark.anyio
async def test_cluster_budgets_reserve_refuse_and_settle(
    cluster: RedisCluster, tmp_path: Path, tenants: list[str]
) -> None:
    budget = BudgetConfig(monthly_usd="0.000003")  # type: ignore[arg-type]  # 3,000 nano-dollars
    budgets = Budgets(cluster, budget_of=lambda name: budget)  # type: ignore[arg-type]
    async with Ledger(cluster, spool_dir=tmp_path / "spool") as ledger:  # type: ignore[arg-type]
        for tenant in tenants:
            held = [await budgets.reserve(tenant, f"{tenant}-{n}", 1_000) for n in range(3)]
            with pytest.raises(BudgetExceeded):
                await budgets.reserve(tenant, f"{tenant}-3", 1_000)
            await budgets.release(held[2])
            ledger.record(event(tenant, 0, cost=1_000))  # settles the first hold
            await ledger.drain()
            assert await budgets.reserve(tenant, f"{tenant}-4", 1_000) is not None
            with pytest.raises(BudgetExceeded):
                await budgets.reserve(tenant, f"{tenant}-5", 1_000)


@pytest.mark.anyio
async def test_cluster_managed_keys_and_their_budgets(
    cluster: RedisCluster, tmp_path: Path, tenants: list[str]
) -> None:
    """Managed keys' records and version share a slot (one script changes both); a key's budget is held
    with its tenant's and settled by the apply script, each on its tenant's node."""
    store = KeyStore(cluster, prefix=f"gw-{uuid.uuid4().hex[:8]}")  # type: ignore[arg-type]
    now = time.time()
    key, _ = await store.create(tenant=tenants[0], name="a", now=now)
    await store.rotate(key.id, now=now, overlap_seconds=60)
    await store.revoke(key.id, now=now)
    version, found = await store.load()
    assert version == 3 and found[0].status(now) == "revoked" and len(found[0].secrets) == 2
    budgets = Budgets(cluster, budget_of=lambda name: None)  # type: ignore[arg-type]
    key_budget = KeyBudget("key_0000c1a5", BudgetConfig(daily_usd="0.000002"))  # type: ignore[arg-type]
    async with Ledger(cluster, spool_dir=tmp_path / "spool") as ledger:  # type: ignore[arg-type]
        for tenant in tenants:
            await budgets.reserve(tenant, f"{tenant}-0", 1_000, key_budget)
            await budgets.reserve(tenant, f"{tenant}-1", 1_000, key_budget)
            with pytest.raises(BudgetExceeded, match="key's daily budget"):
                await budgets.reserve(tenant, f"{tenant}-2", 1_000, key_budget)
            settled = event(tenant, 0, cost=500)
            ledger.record(replace(settled, key_id=key_budget.key_id))
            await ledger.drain()
            assert await budgets.reserve(tenant, f"{tenant}-3", 500, key_budget) is not None


@pytest.mark.anyio
async def test_cluster_sampler_streams_and_caches_stay_in_one_slot_each(
    cluster: RedisCluster, tenants: list[str]
) -> None:
    keys = SamplingKeys()
    models = [f"m-{uuid.uuid4().hex[:8]}" for _ in range(12)]
    entries = [Entry(model, keys.samples(model), {"n": str(n)}, 100) for n in range(3) for model in models]
    await append(cluster, entries, keys=keys)  # type: ignore[arg-type]
    for model in models:
        assert await cluster.xlen(keys.samples(model)) == 3
    assert set(models) <= {member.decode() for member in await cluster.smembers(keys.models())}

    for tenant in tenants:
        cache = RedisCache(cluster, tenant, "summary")  # type: ignore[arg-type]
        await cache.set("k", b"value", ttl_seconds=60)
        assert await cache.get("k") == b"value"
        assert await cache.acquire("k", ttl_seconds=5)
        assert not await cache.acquire("k", ttl_seconds=5)
        await cache.release("k")  # a Lua script on the lock key
        assert await cache.acquire("k", ttl_seconds=5)


@pytest.mark.anyio
async def test_cluster_serve_records_events_and_enforces_budgets(
    tmp_path: Path,
    mock_url: str,
    mock: httpx.Client,
    cluster_url: str,
    cluster: RedisCluster,
    tenant_name: str,
) -> None:
    config = mock_config(mock_url, {tenant_name: {"keys": [TENANT_KEY], "budget": {"monthly_usd": "0.0005"}}})
    body = {"model": "gpt-5.4", "max_tokens": 5, "messages": [{"role": "user", "content": "Hello there"}]}
    headers = {"authorization": f"Bearer {TENANT_KEY}"}
    env = {"GATEWAY_REDIS_URL": cluster_url, "GATEWAY_REDIS_CLUSTER": "true"}
    with serving(tmp_path, config, **env) as (_, url):
        assert httpx.get(f"{url}/readyz").status_code == 200
        answered: list[str] = []
        for _ in range(100):
            response = httpx.post(f"{url}/v1/chat/completions", json=body, headers=headers, timeout=30)
            if response.status_code == 429:
                break
            assert response.status_code == 200, response.text
            answered.append(response.headers["x-gateway-request-id"])
        assert response.json()["error"]["code"] == "budget_exceeded"
    reader = LedgerReader(cluster)  # type: ignore[arg-type]
    found = [found async for found in reader.events(tenant_name, this_hour())]
    assert sorted(e.id for e in found) == sorted(answered) and answered
    usage = await reader.usage(tenant_name, now_ms=int(time.time() * 1000))
    assert usage.this_month.cost_nanos == sum(e.cost_nanos for e in found) <= 500_000
