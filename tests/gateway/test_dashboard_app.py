"""The dashboard in the gateway's own app: it reads what the gateway recorded, and its session cookie
opens the admin reports it links to (reads only: a change still needs the key itself)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gateway.dashboard import session
from tests.factories import ADMIN_KEY
from tests.gateway.test_compression_pipeline import Upstream, compression_config, history, serving


@pytest.mark.anyio
async def test_dashboard_in_the_gateway_shows_its_spend_and_its_cookie_reads_admin_reports(
    tmp_path: Path, redis_url: str, tenant_name: str
) -> None:
    async with serving(tmp_path, redis_url, Upstream(), compression_config(tenant_name)) as served:
        client = served.client
        answer = await client.post("/admin/dashboard/login", data={"key": ADMIN_KEY})
        assert answer.status_code == 303 and session.COOKIE in client.cookies
        for _ in range(3):
            await served.chat(history(2))
        events = await served.events(tenant_name, 3)
        page = await client.get("/admin/dashboard", params={"period": "today", "tenant": tenant_name})
        assert page.status_code == 200
        shown = re.search(r'id="total-cost" data-value="(\d+)"', page.text)
        assert shown is not None and int(shown.group(1)) == sum(event.cost_nanos for event in events) > 0
        assert (await client.get("/admin/config")).status_code == 200
        assert (await client.post("/admin/config/reload")).status_code == 401
        client.cookies.clear()
        assert (await client.get("/admin/config")).status_code == 401


@pytest.mark.anyio
async def test_dashboard_is_disabled_without_an_admin_key(
    tmp_path: Path, redis_url: str, tenant_name: str
) -> None:
    async with serving(tmp_path, redis_url, Upstream(), compression_config(tenant_name)) as served:
        served.app.state.gateway.settings.admin_key = None
        page = await served.client.get("/admin/dashboard")
        login = await served.client.post("/admin/dashboard/login", data={"key": ADMIN_KEY})
    assert page.status_code == 403 and "set GATEWAY_ADMIN_KEY" in page.text
    assert login.status_code == 403 and session.COOKIE not in served.client.cookies
