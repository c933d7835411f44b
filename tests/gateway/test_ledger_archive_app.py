"""The gateway with an archive configured, in one process with its lifespan: requests never wait on
PostgreSQL (one that hangs, here), their events land in Redis, the finance routes say the archive is
unavailable, and a gateway started later with a working archive drains what the first one left pending
and answers the finance routes from the archive as Redis would."""

from __future__ import annotations

import asyncio
import socket
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import redis.asyncio as aioredis
import respx

from gateway.ledger.archive_reader import ArchiveReader
from gateway.ledger.keys import LedgerKeys
from gateway.ledger.period import Period
from gateway.ledger.reader import LedgerReader
from gateway.ledger.summary import summarize, total
from tests.factories import ADMIN_KEY, chat_body, completion, gateway_client, make_config

UPSTREAM = "http://upstream.test/v1"
ADMIN = {"authorization": f"Bearer {ADMIN_KEY}"}
REQUESTS = 12


@contextmanager
def hanging_server() -> Iterator[int]:
    """A port that takes connections and never answers (a PostgreSQL that hangs)."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)
        yield listener.getsockname()[1]


def with_archive(prefix: str, archive: str) -> dict[str, Any]:
    config = make_config()
    config["ledger"] = {"key_prefix": prefix, "archive": archive, "archive_poll_seconds": 0.1}
    return config


def upstream() -> respx.Router:
    router = respx.Router(assert_all_called=False)
    usage = {"prompt_tokens": 1_000, "completion_tokens": 20}
    router.post(f"{UPSTREAM}/chat/completions").mock(
        return_value=httpx.Response(200, json=completion(usage=usage))
    )
    return router


async def archived_ids(url: str, period: Period) -> list[str]:
    return [event.id async for event in ArchiveReader(url).events("acme", period)]


async def redis_events(redis_url: str, prefix: str, period: Period) -> tuple[list[str], dict[str, Any]]:
    client = aioredis.Redis.from_url(redis_url)
    try:
        reader = LedgerReader(client, keys=LedgerKeys(prefix))
        ids = [event.id async for event in reader.events("acme", period)]
        rows = await summarize(reader, tenants=["acme"], period=period, group_by="tenant")
        return ids, {"requests": total(rows).requests, "cost_nanos": total(rows).cost_nanos}
    finally:
        await client.aclose()


def test_requests_never_wait_on_the_archive_and_a_later_drain_catches_up(
    tmp_path: Path, redis_url: str, archive_url: str
) -> None:
    prefix = f"app-{uuid.uuid4().hex[:10]}"
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    started = time.time()
    with hanging_server() as port:
        hanging = f"postgresql://postgres@127.0.0.1:{port}/ledger?connect_timeout=1"
        with gateway_client(
            tmp_path / "one", redis_url, upstream(), config=with_archive(prefix, hanging)
        ) as client:
            answers = [client.post("/v1/chat/completions", json=chat_body()) for _ in range(REQUESTS)]
            assert [answer.status_code for answer in answers] == [200] * REQUESTS
            refused = client.get("/admin/costs/summary", headers=ADMIN)
            assert refused.status_code == 503
            assert refused.json()["error"]["code"] == "archive_unavailable"
    ids = sorted(answer.headers["x-gateway-request-id"] for answer in answers)
    period = Period(int(started * 1000) - 60_000, int(time.time() * 1000) + 60_000)
    in_redis, redis_total = asyncio.run(redis_events(redis_url, prefix, period))
    assert sorted(in_redis) == ids
    assert asyncio.run(archived_ids(archive_url, period)) == []

    with gateway_client(
        tmp_path / "two", redis_url, upstream(), config=with_archive(prefix, archive_url)
    ) as client:
        deadline = time.monotonic() + 30
        while sorted(asyncio.run(archived_ids(archive_url, period))) != ids:
            assert time.monotonic() < deadline, "the archive did not catch up"
            time.sleep(0.1)
        summary = client.get("/admin/costs/summary", headers=ADMIN, params={"tenant": "acme"}).json()
        exported = client.get("/admin/costs", headers=ADMIN, params={"tenant": "acme", "format": "ndjson"})
        history = client.get("/v1/gateway/usage/history", params={"group_by": "model"}).json()
        archived = f'gateway_archive_events_total{{outcome="archived"}} {float(REQUESTS)}'
        while archived not in client.get("/metrics").text:
            assert time.monotonic() < deadline, client.get("/metrics").text  # gauges refresh every second
            time.sleep(0.2)
        assert "gateway_archive_up 1.0" in client.get("/metrics").text
    assert summary["total"]["requests"] == redis_total["requests"] == REQUESTS
    assert (history["tenant"], history["total"]) == ("acme", summary["total"])  # the tenant's own, archived
    assert round(float(summary["total"]["cost_usd"]) * 1e9) == redis_total["cost_nanos"]
    assert sorted(line.split('"id":"')[1].split('"')[0] for line in exported.text.splitlines()) == ids
