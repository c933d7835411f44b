"""The total-cost view per model and context length, read from a real Redis: cells, side calls found
through their request, experiments side by side, thin cells marked; the CLI and the admin route."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import redis.asyncio as aioredis
import respx

from gateway.analysis.costs import cost_view, document
from gateway.analysis.histogram import LogHistogram
from gateway.cli import main
from gateway.config.schema.root import GatewayConfig
from gateway.ledger.apply import EventApplier
from gateway.ledger.event import CostEvent
from gateway.ledger.keys import LedgerKeys
from gateway.ledger.period import Period
from gateway.ledger.reader import LedgerReader
from tests.factories import (
    ADMIN_KEY,
    TENANT_KEY,
    UPSTREAM,
    chat_body,
    completion,
    gateway_client,
    make_config,
    write_config,
)
from tests.gateway.test_ledger_event import NOV_30_NOON, make_event

ADMIN = {"authorization": f"Bearer {ADMIN_KEY}"}
NOV_30 = Period(NOV_30_NOON - 43_200_000, NOV_30_NOON + 43_200_000)
EXPERIMENT = {
    "mode": "shadow", "primary": ["gpt-5.4"], "candidate": "small", "sample_rate": 0.1,
    "budget_usd_per_day": 5,
}  # fmt: skip


def config_dict() -> dict[str, Any]:
    return make_config(sampling={"boundary": {"min_count": 3}}, experiments={"exp": EXPERIMENT})


def request(number: int, tenant: str, **fields: Any) -> CostEvent:
    values: dict[str, Any] = {
        "tenant": tenant, "model": "gpt-5.4", "action": "forward", "prompt_tokens": 1000,
        "input_tokens": 1000, "cached_tokens": 0, "retries": 0, "status": 200,
    }  # fmt: skip
    values.update(fields)
    return make_event(number, **values)


def events(tenant: str) -> list[CostEvent]:
    return [
        request(
            1, tenant, cost_nanos=1000, upstream_ms=100, first_token_ms=50, cost_parts=(600, 100, 0, 300)
        ),
        request(
            2, tenant, prompt_tokens=9000, input_tokens=2000, cost_nanos=3000, retries=1, action="compress",
            upstream_ms=200, cost_parts=(1000, 0, 0, 2000),
        ),
        request(3, tenant, status=502, cost_nanos=0, upstream_ms=300, input_tokens=0),
        request(4, tenant, id="req-2:summary:1", parent_id="req-2", model="small", cost_nanos=500),
        request(5, tenant, prompt_tokens=300_000, input_tokens=300_000, cost_nanos=10_000, upstream_ms=900),
        request(6, tenant, id="gone:summary:1", parent_id="gone", model="small", cost_nanos=70),
        request(
            7, f"experiment:{tenant}", id="req-1:shadow", parent_id="req-1", action="shadow", model="small",
            cost_nanos=100, upstream_ms=80, prompt_tokens=None, input_tokens=7000,
        ),
    ]  # fmt: skip


@pytest.fixture
def prefix(redis_url: str, tenant_name: str) -> str:
    keys = LedgerKeys(f"cv-{tenant_name}")

    async def fill() -> None:
        client = aioredis.Redis.from_url(redis_url)
        try:
            await EventApplier(client, keys=keys, retention_months=13).apply(events(tenant_name))
        finally:
            await client.aclose()

    asyncio.run(fill())
    return keys.prefix


def test_histogram_percentiles_are_within_two_percent() -> None:
    histogram = LogHistogram()
    for value in range(1, 1001):
        histogram.add(value)
    histogram.add(None)
    spread = histogram.spread()
    assert spread is not None and spread["count"] == 1000
    for name, exact in (("p10", 100), ("p50", 500), ("p90", 900)):
        assert abs(spread[name] - exact) <= exact * 0.02
    assert LogHistogram().spread() is None


@pytest.mark.anyio
async def test_cells_add_up_requests_side_calls_and_failures(redis_url: str, prefix: str) -> None:
    config = GatewayConfig.model_validate(config_dict())
    client = aioredis.Redis.from_url(redis_url)
    try:
        reader = LedgerReader(client, keys=LedgerKeys(prefix))
        view = await cost_view(reader.merged_events(await reader.tenants(), NOV_30), config)
    finally:
        await client.aclose()
    body = document(view, config, period={"from": "a", "to": "b"})
    rows = {(row["model"], row["bucket"]): row for row in body["rows"]}
    assert set(rows) == {
        ("gpt-5.4", "0-8K"),
        ("gpt-5.4", "8K-32K"),
        ("gpt-5.4", "272K-1M"),
        ("small", "0-8K"),
    }
    short = rows[("gpt-5.4", "0-8K")]
    assert (short["requests"], short["successes"], short["thin"]) == (2, 1, True)
    assert short["failure_rate"] == 0.5 and short["retry_rate"] == 0.0
    assert short["spend_usd"] == "0.000001" and short["side_spend_usd"] == "0.00"
    assert short["cost_per_success_usd"] == "0.000001"  # the failed request's $0 and the success's $0.000001
    assert short["input_usd_per_1k_tokens"] == "0.0000007"  # 700 nanos for 1,000 tokens, from cost_parts
    compressed = rows[("gpt-5.4", "8K-32K")]  # bucketed by the prompt as received (9,000), not as sent
    assert compressed["transform_share"] == 1.0 and compressed["retry_rate"] == 1.0
    assert compressed["side_spend_usd"] == "0.0000005"  # its summary call, found through its parent
    assert compressed["cost_per_success_usd"] == "0.0000035"
    assert compressed["first_token_ms"] is None
    latency = compressed["latency_ms"]
    assert latency["count"] == 1 and abs(latency["p50"] - 200) <= 4
    shadow = rows[("small", "0-8K")]
    assert shadow["shadow_calls"] == 1 and shadow["requests"] == 1
    assert body["unattributed_side_spend_usd"] == {"small": "0.00000007"}
    assert [(pair["experiment"], pair["bucket"], sorted(pair["models"])) for pair in body["experiments"]] == [
        ("exp", "0-8K", ["gpt-5.4", "small"])
    ]


def test_costs_models_cli_prints_the_table(
    redis_url: str, prefix: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(tmp_path / "gateway.yaml", config_dict())
    code = main([
        "costs", "models", "--from", "2026-11-30", "--to", "2026-11-30", "--redis-url", redis_url,
        "--key-prefix", prefix, "--config", str(config),
    ])  # fmt: skip
    assert code == 0
    out = capsys.readouterr().out
    assert "7 events" in out
    line = next(line for line in out.splitlines() if line.startswith("gpt-5.4") and "272K-1M" in line)
    assert line.split()[2] == "1" and line.endswith("thin")
    assert "experiment exp, 0-8K:" in out
    assert main(["costs", "models", "--since", "soon", "--redis-url", redis_url]) == 1
    assert "invalid --since/--from/--to: 'soon' is neither a duration" in capsys.readouterr().err


def test_admin_route_answers_json_and_html(tmp_path: Path, redis_url: str, tenant_name: str) -> None:
    router = respx.Router(assert_all_called=False)
    router.post(f"{UPSTREAM}/chat/completions").mock(return_value=httpx.Response(200, json=completion()))
    # a tenant of its own (other tests' tenants share this Redis), and no experiment: no shadow call
    config = make_config(
        sampling={"boundary": {"min_count": 3}}, tenants={tenant_name: {"keys": [TENANT_KEY]}}
    )
    with gateway_client(tmp_path, redis_url, router, config=config) as client:
        assert [client.post("/v1/chat/completions", json=chat_body()).status_code for _ in range(2)] == [
            200,
            200,
        ]
        assert client.get("/admin/costs/models").status_code == 401
        bad = client.get("/admin/costs/models", params={"format": "xml"}, headers=ADMIN)
        assert bad.status_code == 400 and bad.json()["error"]["param"] == "format"
        assert client.get("/admin/costs/models", params={"since": "soon"}, headers=ADMIN).status_code == 400
        for _ in range(200):  # the ledger writes in the background: until both requests are in
            answer = client.get(
                "/admin/costs/models", params={"tenant": tenant_name, "since": "1h"}, headers=ADMIN
            )
            rows = orjson.loads(answer.content)["rows"]
            if rows and rows[0]["requests"] == 2:
                break
            time.sleep(0.025)
        page = client.get(
            "/admin/costs/models",
            params={"format": "html", "tenant": tenant_name, "since": "1h"},
            headers=ADMIN,
        )
    body = orjson.loads(answer.content)
    assert answer.status_code == 200 and body["object"] == "gateway.cost_per_model"
    [row] = body["rows"]
    assert (row["model"], row["bucket"], row["requests"], row["failure_rate"]) == ("gpt-5.4", "0-8K", 2, 0.0)
    assert row["latency_ms"]["count"] == 2 and row["thin"] is True
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert '<tr class="thin"><td>gpt-5.4</td><td>0-8K</td><td>2</td>' in page.text
