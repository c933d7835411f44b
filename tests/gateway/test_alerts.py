"""Budget and policy-fit alerts: the ladder and the forecast, claims that send each alert once across
instances, delivery to a real receiver process with retries, and requests that never wait for it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis.asyncio as aioredis
import respx

from gateway.alerts.alert import Alert
from gateway.alerts.checker import AlertChecker
from gateway.alerts.fit import FitCount, fit_alerts
from gateway.alerts.ladder import Spend, forecast_alert, ladder_alerts
from gateway.alerts.webhook import Webhook
from gateway.config.schema.alerts import AlertsConfig, PolicyFitConfig
from gateway.config.schema.ledger import BudgetConfig
from gateway.config.schema.root import GatewayConfig
from gateway.ledger.apply import EventApplier
from gateway.ledger.keys import LedgerKeys
from gateway.ledger.period import to_ms
from gateway.ledger.reader import LedgerReader
from tests.alert_receiver import receiver
from tests.factories import (
    ADMIN_KEY,
    TENANT_KEY,
    UPSTREAM,
    chat_body,
    completion,
    gateway_client,
    make_config,
)
from tests.gateway.test_ledger_event import make_event
from tests.ports import free_port

DOLLAR = 1_000_000_000
NOV_11 = to_ms(datetime(2026, 11, 11, tzinfo=UTC))  # a third of November gone


def monthly(usd: int = 100, **more: Any) -> BudgetConfig:
    return BudgetConfig.model_validate({"monthly_usd": usd, **more})


def test_ladder_names_every_threshold_reached_per_period() -> None:
    budget = BudgetConfig.model_validate({"monthly_usd": 100, "daily_usd": 10})
    alerts = ladder_alerts("acme", budget, (50, 80, 100), Spend(8 * DOLLAR, 55 * DOLLAR), now_ms=NOV_11)
    assert [(alert.period, alert.name) for alert in alerts] == [
        ("2026-11-11", "50"),
        ("2026-11-11", "80"),
        ("2026-11", "50"),
    ]
    assert alerts[1].text == (
        ":warning: Tenant *acme* has reached 80% of its daily budget of $10.00 for 2026-11-11: "
        "$8.00 spent (80%)."
    )
    full = ladder_alerts("acme", monthly(), (50, 80, 100), Spend(0, 100 * DOLLAR), now_ms=NOV_11)
    assert [alert.name for alert in full] == ["50", "80", "100"]
    assert "Requests that could cross it are refused." in full[-1].text
    assert ladder_alerts("acme", monthly(), (50,), Spend(0, 49 * DOLLAR), now_ms=NOV_11) == []


def test_forecast_extrapolates_the_month_so_far() -> None:
    # 10 of 30 days gone: $40 runs to $120 at that rate, over $100; $30 runs to $90, under
    due = forecast_alert("acme", monthly(), Spend(0, 40 * DOLLAR), now_ms=NOV_11, after_hours=72)
    assert due is not None and due.kind == "forecast" and due.period == "2026-11"
    assert due.figures["forecast_usd"] == "120.00"
    assert forecast_alert("acme", monthly(), Spend(0, 30 * DOLLAR), now_ms=NOV_11, after_hours=72) is None
    early = to_ms(datetime(2026, 11, 2, tzinfo=UTC))  # a day in: too little to extrapolate
    assert forecast_alert("acme", monthly(), Spend(0, 40 * DOLLAR), now_ms=early, after_hours=72) is None
    assert forecast_alert("acme", monthly(), Spend(0, 100 * DOLLAR), now_ms=NOV_11, after_hours=72) is None
    daily_only = BudgetConfig.model_validate({"daily_usd": 1})
    assert forecast_alert("acme", daily_only, Spend(0, 99 * DOLLAR), now_ms=NOV_11, after_hours=72) is None


def test_policy_fit_counts_requests_past_the_cliff_and_in_the_band() -> None:
    count = FitCount()
    for number in range(20):
        action = "compress" if number < 12 else "forward"
        count.add(make_event(number, action=action, tier=">272K" if number == 0 else None))
    count.add(make_event(99, action="summary", parent_id="req-1"))  # a side call counts for nothing
    assert (count.requests, count.over_cliff, count.in_band) == (20, 1, 12)
    alerts = fit_alerts("acme", count, PolicyFitConfig(min_requests=20), now_ms=NOV_11)
    assert [alert.name for alert in alerts] == ["over_cliff", "warning_band"]
    assert "12 of 20 requests in the last 60 minutes (60%) landed in the warning band" in alerts[1].text
    assert fit_alerts("acme", count, PolicyFitConfig(min_requests=21), now_ms=NOV_11) == []


def test_alert_config_is_checked() -> None:
    with pytest.raises(ValueError, match="ascending"):
        AlertsConfig(thresholds=(80, 50))
    with pytest.raises(ValueError, match="http"):
        AlertsConfig(webhook_url="hooks.slack.com/x")
    with pytest.raises(ValueError, match="percent"):
        BudgetConfig.model_validate({"monthly_usd": 1, "alert_thresholds": [0]})
    assert not AlertsConfig().enabled


@pytest.fixture
def hook() -> Iterator[str]:
    with receiver() as url:
        yield url


def config_for(tenant: str, hook: str, *, budget: dict[str, Any], **alerts: Any) -> GatewayConfig:
    data = make_config(
        tenants={tenant: {"keys": ["sk-alerts-test"], "budget": budget}},
        alerts={
            "webhook_url": f"{hook}/hook",
            "attempts": 3,
            "backoff_initial_seconds": 0.01,
            "backoff_max_seconds": 0.02,
            "policy_fit": {"enabled": False},
            **alerts,
        },
    )
    return GatewayConfig.model_validate(data)


class Outcomes:
    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []

    def __call__(self, kind: str, outcome: str) -> None:
        self.seen.append((kind, outcome))


def checker(redis: aioredis.Redis, config: GatewayConfig, outcomes: Outcomes) -> tuple[AlertChecker, Webhook]:
    webhook = Webhook(lambda: config.alerts, count=outcomes)
    reader = LedgerReader(redis, keys=LedgerKeys())
    return AlertChecker(redis, reader=reader, config=lambda: config, webhook=webhook), webhook


async def spend(redis: aioredis.Redis, tenant: str, number: int, nanos: int) -> None:
    event = make_event(number, tenant=tenant, time_ms=int(time.time() * 1000), cost_nanos=nanos)
    await EventApplier(redis, keys=LedgerKeys(), retention_months=13).apply([event])


async def received(hook: str) -> dict[str, Any]:
    async with httpx.AsyncClient() as client:
        answer: dict[str, Any] = (await client.get(f"{hook}/received")).json()
        return answer


@pytest.mark.anyio
async def test_each_threshold_is_sent_once_across_instances(
    redis_url: str, redis_client: aioredis.Redis, tenant_name: str, hook: str
) -> None:
    """Two instances check the same spend at once; the receiver gets one alert per threshold reached."""
    config = config_for(tenant_name, hook, budget={"monthly_usd": 1}, forecast=False)
    other = aioredis.Redis.from_url(redis_url)
    outcomes = Outcomes()
    first, first_hook = checker(redis_client, config, outcomes)
    second, second_hook = checker(other, config, outcomes)
    try:
        await spend(redis_client, tenant_name, 1, 850_000_000)  # $0.85 of $1: past 50% and 80%
        sent = await asyncio.gather(first.check(), second.check())
        assert sorted(alert.name for alert in sent[0] + sent[1]) == ["80"]  # 50 claimed, not sent
        assert await first.check() == [] and await second.check() == []
        await spend(redis_client, tenant_name, 2, 150_000_000)
        sent = await asyncio.gather(first.check(), second.check())
        assert [alert.name for alert in sent[0] + sent[1]] == ["100"]
        await first_hook.drain()
        await second_hook.drain()
    finally:
        await first_hook.aclose()
        await second_hook.aclose()
        await other.aclose()
    got = (await received(hook))["received"]
    assert [body["alert"]["name"] for body in got] == ["80", "100"]
    assert all(body["alert"]["tenant"] == tenant_name and body["text"].startswith(":") for body in got)
    assert got[1]["alert"]["spent_usd"] == "1.00"
    assert outcomes.seen == [("budget", "delivered"), ("budget", "delivered")]


@pytest.mark.anyio
async def test_a_failing_receiver_is_retried_then_counted(hook: str) -> None:
    async with httpx.AsyncClient() as client:
        await client.post(f"{hook}/behave", json={"fail": 2})
    config = AlertsConfig(webhook_url=f"{hook}/hook", attempts=3, backoff_initial_seconds=0.01)
    outcomes = Outcomes()
    webhook = Webhook(lambda: config, count=outcomes)
    alert = Alert("budget", "acme", "2026-11", "50", "half spent", claim_until_ms=0)
    try:
        assert await webhook.deliver(alert)
    finally:
        await webhook.aclose()
    assert outcomes.seen == [("budget", "retried"), ("budget", "retried"), ("budget", "delivered")]
    assert [body["text"] for body in (await received(hook))["received"]] == ["half spent"]


@pytest.mark.anyio
async def test_a_receiver_that_is_down_fails_after_every_attempt() -> None:
    config = AlertsConfig(
        webhook_url=f"http://127.0.0.1:{free_port()}/hook", attempts=2, backoff_initial_seconds=0.01
    )
    outcomes = Outcomes()
    webhook = Webhook(lambda: config, count=outcomes)
    alert = Alert("forecast", "acme", "2026-11", "forecast", "on course", claim_until_ms=0)
    try:
        assert webhook.send(alert)
        await webhook.drain()
    finally:
        await webhook.aclose()
    assert outcomes.seen == [("forecast", "retried"), ("forecast", "failed")]


@pytest.mark.anyio
async def test_checker_with_alerts_off_claims_nothing(redis_client: aioredis.Redis, tenant_name: str) -> None:
    data = make_config(tenants={tenant_name: {"keys": ["sk-off"], "budget": {"monthly_usd": 1}}})
    config = GatewayConfig.model_validate(data)
    await spend(redis_client, tenant_name, 1, DOLLAR)
    outcomes = Outcomes()
    off, webhook = checker(redis_client, config, outcomes)
    assert await off.check() == []
    assert await redis_client.keys(f"gw:{{{tenant_name}}}:alert:*") == []
    await webhook.aclose()


def test_requests_never_wait_for_a_held_alert(
    tmp_path: Path, redis_url: str, hook: str, tenant_name: str
) -> None:
    """The receiver holds the alert unanswered; the tenant's requests are answered all the while."""
    httpx.post(f"{hook}/behave", json={"hold": True})
    router = respx.Router(assert_all_called=False)
    usage = {"prompt_tokens": 100_000, "completion_tokens": 10, "total_tokens": 100_010}
    router.post(f"{UPSTREAM}/chat/completions").mock(
        return_value=httpx.Response(200, json=completion(usage=usage))
    )
    config = make_config(alerts={"webhook_url": f"{hook}/hook", "check_interval_seconds": 0.1})
    budget = {"monthly_usd": 1, "hard": False}  # $0.25 a request: 25%
    config["tenants"] = {tenant_name: {"keys": [TENANT_KEY], "budget": budget}}  # its own: no earlier spend
    try:
        with gateway_client(tmp_path, redis_url, router, config=config) as client:
            statuses = [client.post("/v1/chat/completions", json=chat_body()).status_code for _ in range(3)]
            held = _wait_for(lambda: received_now(hook)["held"] >= 1)
            statuses += [client.post("/v1/chat/completions", json=chat_body()).status_code for _ in range(2)]
            still = received_now(hook)["held"]
            httpx.post(f"{hook}/release")
    finally:
        httpx.post(f"{hook}/release")
    assert statuses == [200] * 5
    assert held and still >= 1  # the alert was still unanswered while the last requests were served
    assert received_now(hook)["received"][0]["alert"]["tenant"] == tenant_name


def received_now(hook: str) -> dict[str, Any]:
    answer: dict[str, Any] = httpx.get(f"{hook}/received").json()
    return answer


def _wait_for(condition: Any, tries: int = 400) -> bool:
    for _ in range(tries):
        if condition():
            return True
        time.sleep(0.025)
    return False


def test_the_webhook_url_is_redacted_in_the_effective_config(tmp_path: Path, redis_url: str) -> None:
    router = respx.Router(assert_all_called=False)
    secret = "https://hooks.example.test/services/T000/B000/s3cr3tw3bh00k"
    config = make_config(alerts={"webhook_url": secret, "headers": {"x-token": "h3ad3r"}})
    with gateway_client(tmp_path, redis_url, router, config=config) as client:
        body = client.get("/admin/config", headers={"authorization": f"Bearer {ADMIN_KEY}"}).json()
    assert body["config"]["alerts"]["webhook_url"] == "***"
    assert body["config"]["alerts"]["headers"] == {"x-token": "***"}
    assert "s3cr3t" not in str(body) and "h3ad3r" not in str(body)
