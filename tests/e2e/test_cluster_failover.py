"""A master of a real Redis Cluster (3 masters, 3 replicas) is killed with SIGKILL while two gateway
instances of two workers each serve chat and Responses traffic: every upstream call has exactly one cost
event, and every stored response stays fetchable by its owner, from either instance."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from contextlib import AsyncExitStack
from pathlib import Path

import httpx
import openai
import pytest
from redis.asyncio.cluster import RedisCluster
from redis.crc import key_slot

from gateway.edge.lifespan import redis_client
from gateway.ledger import LedgerReader, Period
from tests.cluster import Cluster, Node, names_on_every_master, redis_cluster
from tests.e2e.ledger_helpers import wait_until
from tests.e2e.test_shutdown import mock_config, serving

CHAT_REQUESTS = 480
RESPONSES_REQUESTS = 60
CONCURRENCY = 12
KILL_AFTER = 120
FETCH_SECONDS = 10
"""Answers received before the master dies: the rest of the load runs through the failover."""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with redis_cluster(tmp_path_factory.mktemp("failover"), masters=3, replicas_per_master=1) as started:
        yield started


def keys_of(tenant: str) -> str:
    return f"sk-{tenant}"


async def one_chat(client: openai.AsyncOpenAI, number: int) -> str | None:
    response = await client.chat.completions.with_raw_response.create(
        model="gpt-5.4",
        messages=[{"role": "user", "content": f"question {number}"}],
        max_completion_tokens=8,
    )
    return response.headers.get("x-gateway-request-id")


async def one_response(client: openai.AsyncOpenAI, number: int) -> tuple[str, str]:
    raw = await client.responses.with_raw_response.create(model="gpt-5.4", input=f"remember {number}")
    return raw.headers["x-gateway-request-id"], raw.parse().id


async def run_load(
    clients: list[openai.AsyncOpenAI], cluster: Cluster, victim_tenant: str
) -> tuple[list[str], list[tuple[int, str]], list[BaseException]]:
    """Chat and Responses requests spread over the clients, ``CONCURRENCY`` at a time; the master holding
    ``victim_tenant``'s slot is killed once ``KILL_AFTER`` have answered."""
    gate = asyncio.Semaphore(CONCURRENCY)
    answered: list[str] = []
    responses: list[tuple[int, str]] = []
    errors: list[BaseException] = []
    killed = asyncio.Event()

    async def guarded(number: int) -> None:
        client = clients[number % len(clients)]
        async with gate:
            try:
                if number % (CHAT_REQUESTS // RESPONSES_REQUESTS) == 0:
                    request_id, response_id = await one_response(client, number)
                    responses.append((number % len(clients), response_id))
                else:
                    request_id = await one_chat(client, number) or ""
            except Exception as exc:  # counted: the test asserts there are none
                errors.append(exc)
                return
            answered.append(request_id)
            if len(answered) >= KILL_AFTER and not killed.is_set():
                killed.set()
                cluster.kill(master_of_tenant(cluster, victim_tenant))

    await asyncio.gather(*(guarded(number) for number in range(CHAT_REQUESTS)))
    assert killed.is_set()
    return answered, responses, errors


async def fetch_everywhere(clients: list[openai.AsyncOpenAI], responses: list[tuple[int, str]]) -> list[str]:
    """Each response fetched by id through the instance that did not create it. One that instance one
    could not write during the failover is written within a moment of Redis being back (kept on disk and
    in that process until then): it is asked for again until it is found, for up to ``FETCH_SECONDS``."""
    fetched = []
    deadline = time.monotonic() + FETCH_SECONDS
    for owner, response_id in responses:
        other = clients[(owner + 1) % len(clients)]
        while True:
            try:
                fetched.append((await other.responses.retrieve(response_id)).id)
                break
            except openai.NotFoundError:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.05)
    return fetched


def master_of_tenant(cluster: Cluster, tenant: str) -> Node:
    return cluster.master_of(key_slot(f"{{{tenant}}}".encode()))


@pytest.mark.anyio
async def test_a_killed_master_loses_no_cost_event_and_no_stored_response(
    cluster: Cluster, tmp_path: Path, mock_url: str, mock: httpx.Client
) -> None:
    tenants = names_on_every_master(cluster, f"f-{uuid.uuid4().hex[:6]}")
    victim = tenants[0]
    config = mock_config(mock_url, {victim: {"keys": [keys_of(victim)]}})
    mock.post("/_reset")
    mock.post("/_control", json={"record_bodies": True})
    env = {"GATEWAY_REDIS_URL": cluster.url, "GATEWAY_REDIS_CLUSTER": "true", "GATEWAY_WORKERS": "2"}
    started = time.time()
    redis = redis_client(f"redis://{cluster.masters[1].address}/0", cluster=True)  # the first one dies
    assert isinstance(redis, RedisCluster)
    reader = LedgerReader(redis)  # type: ignore[arg-type]

    async def ledger_events() -> list[str]:
        period = Period(int(started * 1000) - 60_000, int(time.time() * 1000) + 60_000)
        return [event.id async for event in reader.events(victim, period)]

    async def ledger_has_all() -> str | None:
        found = await ledger_events()
        if sorted(found) == sorted(answered):
            return None
        missing, doubled = set(answered) - set(found), len(found) - len(set(found))
        return f"{len(found)} events for {len(answered)} calls: {len(missing)} missing, {doubled} doubled"

    try:
        async with AsyncExitStack() as stack:
            urls = [
                stack.enter_context(serving(tmp_path / name, config, **env))[1] for name in ("one", "two")
            ]
            clients = [
                await stack.enter_async_context(
                    openai.AsyncOpenAI(
                        base_url=f"{url}/v1", api_key=keys_of(victim), max_retries=0, timeout=60
                    )
                )
                for url in urls
            ]
            answered, responses, errors = await run_load(clients, cluster, victim)
            cluster.wait_healthy(without=[master_of_tenant(cluster, victim)])
            seen = mock.get("/_requests").json()["requests"]
            upstream = [call for call in seen if call["path"].startswith("/v1/")]
            fetched = await fetch_everywhere(clients, responses)
            assert errors == []
            assert len(upstream) == len(answered) == CHAT_REQUESTS
            assert sorted(fetched) == sorted(response_id for _, response_id in responses)
            await wait_until(ledger_has_all, timeout=90)  # while the gateways run: spooled events replay
        assert sorted(await ledger_events()) == sorted(answered)  # and shutting down counts none twice
    finally:
        await redis.aclose()
