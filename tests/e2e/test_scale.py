"""N workers and separate gateway processes on one Redis behave as one gateway: the ledger and the budgets
stay exact under concurrent load, and `/metrics` on any worker shows the sum over all workers."""

from __future__ import annotations

import itertools
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import anyio
import httpx
import pytest
import redis.asyncio as aioredis
from prometheus_client.parser import text_string_to_metric_families

from gateway.ledger import CostEvent, LedgerKeys, LedgerReader, Period
from gateway.ledger.period import day_of, month_of
from gateway.ledger.reply import integer
from tests.e2e.test_shutdown import mock_config, serving
from tests.factories import TENANT_KEY

PROMPT = "7 " * 900  # about 900 tokens to the gateway's count, 450 to the mock's: reservations cover usage
MAX_TOKENS = 50
BUDGET_USD = "0.03"
REQUESTS = 60
IN_NANOS, OUT_NANOS = 2_500, 15_000  # gpt-5.4 in tests.factories: USD 2.50 and 15.00 per million tokens


def chat(url: str, request_id: str) -> httpx.Response:
    body = {
        "model": "gpt-5.4",
        "max_tokens": MAX_TOKENS,
        "messages": [{"role": "user", "content": PROMPT}],
    }
    headers = {"authorization": f"Bearer {TENANT_KEY}", "x-request-id": request_id}
    return httpx.post(f"{url}/v1/chat/completions", json=body, headers=headers, timeout=60)  # new connection


def scrape(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of ``GET /metrics``: (name, sorted labels) -> value."""
    text = httpx.get(f"{url}/metrics", timeout=10).text
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def total(samples: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: str) -> float:
    return sum(
        value
        for (sample, found), value in samples.items()
        if sample == name and all((key, wanted) in found for key, wanted in labels.items())
    )


def workers_that_counted(data_dir: Path) -> int:
    """Worker processes that have counted a request: prometheus_client writes one counter file per pid."""
    return len(list((data_dir / "metrics").glob("counter_*.db")))


async def ledger_events(redis_url: str, tenant: str, expected: int) -> list[CostEvent]:
    """The tenant's events once ``expected`` of them are in Redis (the writers batch in the background)."""
    client = aioredis.Redis.from_url(redis_url)
    try:
        reader = LedgerReader(client)
        now = int(time.time() * 1000)
        period = Period(now - 3_600_000, now + 3_600_000)
        for _ in range(200):
            events = [event async for event in reader.events(tenant, period)]
            if len(events) >= expected:
                return events
            await anyio.sleep(0.1)
        return events
    finally:
        await client.aclose()


async def counters(redis_url: str, tenant: str, events: list[CostEvent]) -> tuple[int, int, int]:
    """(daily cost summed over the events' days, daily request count, monthly cost)."""
    keys = LedgerKeys()
    client = aioredis.Redis.from_url(redis_url)
    try:
        days = sorted({day_of(event.time_ms) for event in events})
        daily_cost = daily_requests = 0
        for day in days:
            daily = await client.hgetall(keys.daily(tenant, day))
            daily_cost += integer(daily.get(b"cost"))
            daily_requests += integer(daily.get(b"requests"))
        months = sorted({month_of(event.time_ms) for event in events})
        monthly = sum([integer(await client.hget(keys.monthly(tenant, month), "cost")) for month in months])
    finally:
        await client.aclose()
    return daily_cost, daily_requests, monthly


def until_both_workers_counted(url: str, data_dir: Path, sent: list[tuple[str, str, httpx.Response]]) -> None:
    """More requests to ``url`` until both of its workers have served one (the kernel picks who accepts)."""
    for _ in range(100):
        if workers_that_counted(data_dir) >= 2:
            return
        rid = f"req-{uuid.uuid4().hex}"
        sent.append((rid, url, chat(url, rid)))
    raise AssertionError("one worker accepted every connection: the test cannot compare workers")


@pytest.mark.anyio
async def test_scale_workers_and_processes_keep_ledger_budget_and_metrics_exact(
    tmp_path: Path, mock_url: str, mock: httpx.Client, redis_url: str, tenant_name: str
) -> None:
    config = mock_config(
        mock_url, {tenant_name: {"keys": [TENANT_KEY], "budget": {"monthly_usd": BUDGET_USD}}}
    )
    two_workers = {"GATEWAY_REDIS_URL": redis_url, "GATEWAY_WORKERS": "2"}
    with (
        serving(tmp_path / "a", config, **two_workers) as (_, first),
        serving(tmp_path / "b", config, **two_workers) as (_, second),
    ):
        targets = list(
            zip([f"req-{uuid.uuid4().hex}" for _ in range(REQUESTS)], itertools.cycle([first, second]))
        )
        with ThreadPoolExecutor(max_workers=12) as pool:
            sent = list(pool.map(lambda target: (*target, chat(target[1], target[0])), targets))
        until_both_workers_counted(first, tmp_path / "a" / "data", sent)
        until_both_workers_counted(second, tmp_path / "b" / "data", sent)
        scrapes = {url: [scrape(url) for _ in range(6)] for url in (first, second)}

    statuses = Counter(response.status_code for _, _, response in sent)
    assert set(statuses) == {200, 429}, statuses
    assert all(r.json()["error"]["code"] == "budget_exceeded" for _, _, r in sent if r.status_code == 429)
    answered = {rid for rid, _, response in sent if response.status_code == 200}
    events = await ledger_events(redis_url, tenant_name, len(answered))
    assert sorted(str(event.client_request_id) for event in events) == sorted(answered), (
        "one event per answered request"
    )
    daily_cost, daily_requests, monthly_cost = await counters(redis_url, tenant_name, events)
    spent = sum(event.cost_nanos for event in events)
    assert spent == daily_cost == monthly_cost
    assert daily_requests == len(events)
    prompt = max(int(r.headers["x-gateway-prompt-tokens"]) for _, _, r in sent if r.status_code == 200)
    assert spent <= int(float(BUDGET_USD) * 1e9) + prompt * IN_NANOS + MAX_TOKENS * OUT_NANOS

    for url, samples in scrapes.items():  # each scrape, whichever worker took it, counts both workers
        mine = Counter(response.status_code for _, sent_to, response in sent if sent_to == url)
        for sample in samples:
            assert total(sample, "gateway_requests_total", status="200", model="gpt-5.4") == mine[200]
            assert total(sample, "gateway_requests_total", status="429") == mine[429]
            assert total(sample, "gateway_overhead_seconds_count", endpoint="chat") == mine[200]
    both = [samples[0] for samples in scrapes.values()]
    assert sum(total(sample, "gateway_cost_usd_total", kind="request") for sample in both) == pytest.approx(
        spent / 1e9
    )
    assert sum(total(sample, "gateway_input_tokens_total") for sample in both) == sum(
        event.input_tokens for event in events
    )
