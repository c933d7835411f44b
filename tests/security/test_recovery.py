"""The gateway recovers with what it depends on, and blames failures on whom they belong to.

- The budget path works again as soon as Redis is back: a connection pooled before Redis restarted is
  tried once more on a new one instead of answering 503.
- A client that goes away before sending its whole body is a client disconnect (499), not a 500.
"""

from __future__ import annotations

import socket
import time
from pathlib import Path
from urllib.parse import urlparse

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from gateway.config.schema.ledger import BudgetConfig, LedgerConfig
from gateway.edge.lifespan import redis_client
from gateway.ledger.budget import Budgets
from gateway.redis.server import EmbeddedRedis
from tests.ports import free_port
from tests.security.conftest import Tenants


@pytest.mark.anyio
async def test_budget_checks_work_at_once_after_redis_restarts(tmp_path: Path) -> None:
    server = EmbeddedRedis(tmp_path / "redis", port=free_port(), persist=False)
    server.start()
    client = redis_client(server.url, cluster=False)
    budget = BudgetConfig.model_validate({"monthly_usd": 1})
    budgets = Budgets(client, budget_of=lambda tenant: budget, config=LedgerConfig(budget_timeout_seconds=2))
    try:
        assert await budgets.reserve("acme", "req_before", 10) is not None  # pools a connection
        server.stop()
        server.start()
        after = await budgets.reserve("acme", "req_after", 10)  # on the pooled, now closed connection
        assert after is not None and after.enforced
    finally:
        await client.aclose()
        server.stop()


def requests_by_status(gateway: str) -> dict[str, float]:
    counts: dict[str, float] = {}
    for family in text_string_to_metric_families(httpx.get(f"{gateway}/metrics", timeout=10).text):
        for sample in family.samples:
            if sample.name == "gateway_requests_total":
                status = sample.labels["status"]
                counts[status] = counts.get(status, 0) + sample.value
    return counts


@pytest.mark.e2e
def test_a_client_that_leaves_mid_body_is_counted_as_a_disconnect(security_gateway: str) -> None:
    before = requests_by_status(security_gateway)
    address = urlparse(security_gateway)
    head = (
        "POST /v1/chat/completions HTTP/1.1\r\nhost: gw\r\ncontent-type: application/json\r\n"
        f"authorization: Bearer {Tenants.key('victim')}\r\ncontent-length: 5000\r\n\r\n"
    )
    with socket.create_connection((address.hostname, address.port), timeout=10) as sock:
        sock.sendall(head.encode() + b'{"model": "gpt-5.4", ')
        time.sleep(0.2)  # the gateway is reading the body
    deadline = time.monotonic() + 10
    while True:
        after = requests_by_status(security_gateway)
        if after.get("499", 0) > before.get("499", 0) or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert after.get("499", 0) == before.get("499", 0) + 1
    assert after.get("500", 0) == before.get("500", 0)
