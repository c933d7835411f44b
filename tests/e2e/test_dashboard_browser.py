"""The cost dashboard in a real browser (Debian's Chromium, driven by Playwright) against a real
``gateway serve`` that recorded traffic from the openai SDK through the mock upstream: sign
in, switch period and filters, check the totals on the page against ``gateway costs summary``, keep a
screenshot, sign out."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import shutil
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import openai
import pytest
import redis.asyncio as aioredis

from gateway.base.money import nanos_from_usd
from gateway.cli import main
from gateway.dashboard.text import dollars
from gateway.ledger import CostEvent, LedgerKeys, LedgerReader, Period
from gateway.ledger.period import day_of
from tests.e2e.ledger_helpers import wait_until
from tests.e2e.processes import gateway_process
from tests.factories import OTHER_KEY, TENANT_KEY, make_config, write_config

CHROMIUM = next((found for name in ("chromium", "chromium-browser") if (found := shutil.which(name))), None)
HAVE_PLAYWRIGHT = importlib.util.find_spec("playwright") is not None
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
ADMIN_KEY = "admin-e2e"  # processes.gateway_process sets GATEWAY_ADMIN_KEY

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        CHROMIUM is None or not HAVE_PLAYWRIGHT,
        reason="browser tests skipped: no Chromium (apt-get install chromium) or no playwright package",
    ),
]


@dataclass(frozen=True)
class Served:
    url: str
    tenants: tuple[str, str]
    events: tuple[CostEvent, ...]
    keys: LedgerKeys
    """The ledger of this gateway alone: "every tenant" on the page is its two tenants, whatever else the
    run's Redis holds (the chart names the 7 tenants that spent most, and other tests spend too)."""


def traffic(url: str) -> None:
    """Requests on two models from two tenants (the first a few more)."""
    for key, count in ((TENANT_KEY, 4), (OTHER_KEY, 2)):
        client = openai.OpenAI(base_url=f"{url}/v1", api_key=key, max_retries=0)
        for number in range(count):
            client.chat.completions.create(
                model=("gpt-5.4", "small")[number % 2],
                messages=[{"role": "user", "content": f"Give me figure number {number} of the quarter."}],
                max_completion_tokens=32,
            )


def recorded(
    redis_url: str, keys: LedgerKeys, tenants: tuple[str, ...], started: float, count: int
) -> list[CostEvent]:
    async def read() -> list[CostEvent]:
        client = aioredis.Redis.from_url(redis_url)
        reader = LedgerReader(client, keys=keys)
        period = Period(int(started * 1000) - 60_000, int(time.time() * 1000) + 60_000)
        found: list[CostEvent] = []

        async def check() -> str | None:
            found[:] = [event async for event in reader.merged_events(tenants, period)]
            return None if len(found) >= count else f"{len(found)} of {count} events recorded"

        try:
            await wait_until(check, timeout=30)
        finally:
            await client.aclose()
        return found

    return asyncio.run(read())


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, mock_url: str, redis_url: str) -> Iterator[Served]:
    directory = tmp_path_factory.mktemp("dashboard")
    suffix = uuid.uuid4().hex[:8]  # tenants of their own: the page shows only this run's spend
    tenants = (f"finance-{suffix}", f"research-{suffix}")
    keys = LedgerKeys(f"dashboard-{suffix}")
    config = make_config(
        tenants={
            tenants[0]: {"keys": [TENANT_KEY], "budget": {"monthly_usd": "0.001", "hard": False}},
            tenants[1]: {"keys": [OTHER_KEY]},
        }
    )
    config["providers"]["mock"]["base_url"] = f"{mock_url}/v1"
    config["models"]["small"]["pricing"] = {"input": "0.75", "cached_input": "0.075", "output": "4.50"}
    config["ledger"] = {"key_prefix": keys.prefix}
    path = write_config(directory / "gateway.yaml", config)
    with gateway_process(path, redis_url, directory) as url:
        started = time.time()
        traffic(url)
        events = recorded(redis_url, keys, tenants, started, 6)
        yield Served(url, tenants, tuple(events), keys)


def summary(
    capsys: pytest.CaptureFixture[str],
    redis_url: str,
    keys: LedgerKeys,
    *args: str,
    group_by: str = "tenant",
    only: str = "",
) -> dict[str, int]:
    """``gateway costs summary`` totals (nano-dollars and requests), as finance would run it; ``only``:
    of that group's row alone."""
    capsys.readouterr()
    command = [
        "costs",
        "summary",
        "--format",
        "json",
        "--group-by",
        group_by,
        "--redis-url",
        redis_url,
        "--key-prefix",
        keys.prefix,
        *args,
    ]
    with ThreadPoolExecutor(1) as thread:  # its own thread: the browser's driver holds an event loop here
        code = thread.submit(main, command).result()
    assert code == 0
    rows: list[dict[str, Any]] = json.loads(capsys.readouterr().out)
    rows = [row for row in rows if not only or row[group_by] == only]
    return {
        "cost": sum(nanos_from_usd(row["cost_usd"]) for row in rows),
        "saving": sum(nanos_from_usd(row["saving_usd"]) for row in rows),
        "requests": sum(row["requests"] for row in rows),
    }


def test_dashboard_in_chromium_signs_in_filters_and_matches_the_ledger(
    served: Served, redis_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from playwright.sync_api import expect, sync_playwright

    week_start = (date.fromisoformat(day_of(int(time.time() * 1000))) - timedelta(days=6)).isoformat()
    first_day = day_of(min(event.time_ms for event in served.events))
    last_day = day_of(max(event.time_ms for event in served.events))
    first = served.tenants[0]
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            page.goto(f"{served.url}/admin/dashboard")
            expect(page.get_by_label("Admin key", exact=True)).to_be_visible()
            page.get_by_label("Admin key", exact=True).fill("not the key")
            page.get_by_role("button", name="Sign in").click()
            expect(page.get_by_role("alert")).to_have_text("Incorrect admin key.")
            page.get_by_label("Admin key", exact=True).fill(ADMIN_KEY)
            page.get_by_role("button", name="Sign in").click()
            expect(page.get_by_role("heading", name="Gateway costs")).to_be_visible()
            assert ADMIN_KEY not in page.url
            (cookie,) = [found for found in page.context.cookies() if found["name"] == "gateway_dashboard"]
            assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and ADMIN_KEY not in cookie["value"]

            # the last 7 days, the first tenant: as gateway costs summary --tenant … --from <6 days ago>
            page.get_by_label("Period", exact=True).select_option("7d")
            page.get_by_label("Tenant", exact=True).select_option(first)
            page.get_by_role("button", name="Apply").click()
            expected = summary(capsys, redis_url, served.keys, "--tenant", first, "--from", week_start)
            assert expected["requests"] == 4 and expected["cost"] > 0
            expect(page.locator("#total-cost")).to_have_text(dollars(expected["cost"]))
            expect(page.locator("#total-saving")).to_have_text(dollars(expected["saving"]))
            expect(page.locator("#total-requests")).to_have_text(f"{expected['requests']:,}")
            expect(page.locator("#table-burn")).to_contain_text(f"{first}")
            assert page.evaluate("() => document.documentElement.scrollWidth") <= 1280

            # custom period, every tenant, one model, stacked by tenant
            page.get_by_label("Period", exact=True).select_option("custom")
            page.get_by_label("From (custom)", exact=True).fill(first_day)
            page.get_by_label("To, inclusive", exact=True).fill(last_day)
            page.get_by_label("Tenant", exact=True).select_option("")
            page.get_by_label("Model", exact=True).select_option("small")
            page.get_by_label("Stack by", exact=True).select_option("tenant")
            page.get_by_role("button", name="Apply").click()
            expect(page.get_by_label("Model", exact=True)).to_have_value("small")
            small_only = summary(
                capsys,
                redis_url,
                served.keys,
                *("--from", first_day, "--to", last_day),
                group_by="model",
                only="small",
            )
            expect(page.locator("#total-cost")).to_have_text(dollars(small_only["cost"]))
            expect(page.locator("#total-requests")).to_have_text(f"{small_only['requests']:,}")
            small = [event for event in served.events if event.model == "small"]
            legend = page.locator("#chart-days text", has_text=first)
            expect(legend).to_have_count(1)
            mine = page.locator("#table-tenants tbody tr", has_text=first).locator("td").nth(1)
            expect(mine).to_have_text(dollars(sum(e.cost_nanos for e in small if e.tenant == first)))
            ARTIFACTS.mkdir(exist_ok=True)
            shot = ARTIFACTS / "dashboard.png"
            page.get_by_label("Tenant", exact=True).select_option(first)
            page.get_by_label("Model", exact=True).select_option("")
            page.get_by_label("Stack by", exact=True).select_option("model")
            page.get_by_role("button", name="Apply").click()
            expect(page.locator("#chart-days")).to_be_visible()
            page.screenshot(path=str(shot), full_page=True)
            print(f"dashboard screenshot: {shot}")

            page.get_by_role("button", name="Sign out").click()
            expect(page.get_by_label("Admin key", exact=True)).to_be_visible()
            assert not [found for found in page.context.cookies() if found["name"] == "gateway_dashboard"]
        finally:
            browser.close()
