"""The cost dashboard on a tiny app over a real Redis: the login and its cookie, and every figure of the
page against ``gateway costs summary`` (the command itself, or the ``summarize`` it calls) and against
the recorded events, to the nano-dollar."""

from __future__ import annotations

import random
import re
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from html import unescape

import anyio
import httpx
import orjson
import pytest
import redis.asyncio as aioredis
from fastapi import FastAPI, Request

from gateway.base.money import nanos_from_usd
from gateway.cli import main
from gateway.config.schema.ledger import BudgetConfig
from gateway.dashboard import session
from gateway.dashboard.figures import side_kind
from gateway.dashboard.periods import choose
from gateway.dashboard.routes import dashboard_router
from gateway.dashboard.view import ReportLink
from gateway.ledger.apply import EventApplier
from gateway.ledger.event import CostEvent
from gateway.ledger.keys import LedgerKeys
from gateway.ledger.period import Period, to_ms
from gateway.ledger.reader import LedgerReader
from gateway.ledger.summary import GroupBy, summarize

ADMIN_KEY = "admin-secret-for-the-dashboard"
NOW = to_ms(datetime(2026, 12, 2, 10, 0)) / 1000
BUDGETS = {"alpha": BudgetConfig(monthly_usd=Decimal("0.05"))}
MOMENTS = [
    "2026-10-31T23:59:59", "2026-11-01T00:00:00", "2026-11-15T08:30:00", "2026-11-30T00:30:00",
    "2026-11-30T12:00:00", "2026-11-30T23:30:00", "2026-12-01T09:00:00", "2026-12-02T00:10:00",
    "2026-12-02T09:59:00",
]  # fmt: skip
ACTIONS = ("forward", "compress", "retrieve", "reroute")
BANDS = ("below_warning", "warning", "over_cliff", None)
BASES = (("forwarded", False), ("conversation", False), ("tenant_share", True))


def recorded() -> list[CostEvent]:
    """Requests on each moment, by two tenants on two models, with every action, band and basis; a third
    of them in one of three conversations; a summary after every fifth and a shadow call after every
    seventh."""
    events = []
    for n in range(54):
        moment = to_ms(datetime.fromisoformat(MOMENTS[n % len(MOMENTS)])) + n
        tenant = ("alpha", "beta")[n % 2]
        basis, estimated = BASES[n % 3]
        main = CostEvent(
            id=f"req-{n}",
            time_ms=moment,
            tenant=tenant,
            key_id="k1",
            requested_model="gpt-5.4",
            model=("gpt-5.4", "gpt-5.4-mini", "gpt-5.4")[n % 3],
            provider="openai",
            action=ACTIONS[n % 4],
            input_tokens=1000 + n,
            cached_tokens=n % 7,
            output_tokens=100 + n,
            cost_nanos=1_000_000 + n * 137,
            counterfactual_nanos=(1_000_000 + n * 137) * (1 if basis == "forwarded" else 2),
            counterfactual_basis=basis,
            estimated=estimated,
            band=BANDS[n % 4],
            conversation=(f"p-conv-{n % 3}" if n % 2 else None),
            tags=None if n % 3 == 0 else {"team": ("search", "ads")[n // 3 % 2], "env": "prod"},
        )
        events.append(main)
        if n % 5 == 0:
            events.append(_side(main, f"req-{n}:summary:1", "summary", 300_000 + n))
        if n % 7 == 0:
            events.append(_side(main, f"req-{n}:compare", main.action, 200_000 + n))
    return events


def _side(main: CostEvent, ident: str, action: str, cost: int) -> CostEvent:
    return CostEvent(
        id=ident,
        time_ms=main.time_ms + 5,
        tenant=main.tenant,
        key_id="k1",
        requested_model="gpt-5.4-mini",
        model="gpt-5.4-mini",
        provider="openai",
        action=action,
        parent_id=main.id,
        input_tokens=500,
        cost_nanos=cost,
        tags=main.tags,
    )


EVENTS = recorded()


@dataclass
class Setup:
    client: httpx.AsyncClient
    reader: LedgerReader
    prefix: str
    clock: list[float]


@pytest.fixture
def scan_limit() -> int:
    return 50_000


@pytest.fixture
async def setup(redis_client: aioredis.Redis, scan_limit: int) -> AsyncIterator[Setup]:
    keys = LedgerKeys(f"test-{random.getrandbits(40):x}")
    await EventApplier(redis_client, keys=keys, retention_months=13).apply(EVENTS)
    reader = LedgerReader(redis_client, keys=keys, budget_of=BUDGETS.get, page_size=7)
    clock = [NOW]

    async def links(request: Request) -> list[ReportLink]:
        return [ReportLink("Behaviour map: gpt-5.4", "/admin/probes/report?model=gpt-5.4&format=html")]

    app = FastAPI()
    app.include_router(
        dashboard_router(
            get_admin_key=lambda request: ADMIN_KEY,
            get_reader=lambda request: reader,
            tenant_names=lambda request: ["alpha", "beta", "gamma"],
            model_names=lambda request: ["gpt-5.4", "gpt-5.4-mini", "o-unused"],
            report_links=links,
            clock=lambda: clock[0],
            scan_limit=scan_limit,
        )
    )
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as client:
        yield Setup(client, reader, keys.prefix, clock)


async def signed_in(client: httpx.AsyncClient) -> None:
    answer = await client.post("/admin/dashboard/login", data={"key": ADMIN_KEY})
    assert answer.status_code == 303 and answer.headers["location"] == "/admin/dashboard"


# --- signing in ------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_dashboard_asks_for_the_key_then_keeps_a_signed_cookie_that_is_not_the_key(
    setup: Setup,
) -> None:
    client = setup.client
    first = await client.get("/admin/dashboard")
    assert first.status_code == 401 and 'name="key" type="password"' in first.text
    assert "set-cookie" not in first.headers and first.headers["cache-control"] == "no-store"
    wrong = await client.post("/admin/dashboard/login", data={"key": "guess"})
    assert wrong.status_code == 401 and "Incorrect admin key." in wrong.text
    assert session.COOKIE not in client.cookies
    answer = await client.post("/admin/dashboard/login", data={"key": ADMIN_KEY})
    cookie = answer.headers["set-cookie"]
    assert (
        answer.status_code == 303 and ADMIN_KEY not in cookie and ADMIN_KEY not in answer.headers["location"]
    )
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/admin" in cookie
    assert "Secure" not in cookie  # plain http; https below
    page = await client.get("/admin/dashboard")
    assert page.status_code == 200 and 'id="total-cost"' in page.text
    assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
    out = await client.post("/admin/dashboard/logout")
    assert out.status_code == 303 and "Max-Age=0" in out.headers["set-cookie"]
    assert (await client.get("/admin/dashboard")).status_code == 401


@pytest.mark.anyio
async def test_dashboard_cookie_is_secure_over_https_and_any_worker_with_the_key_accepts_it(
    setup: Setup,
) -> None:
    transport = setup.client._transport
    async with httpx.AsyncClient(transport=transport, base_url="https://gateway") as client:
        answer = await client.post("/admin/dashboard/login", data={"key": ADMIN_KEY})
        assert "Secure" in answer.headers["set-cookie"]
        value = client.cookies[session.COOKIE]
    # another worker (no shared state) derives the same check from the key alone
    assert session.valid(ADMIN_KEY, value, now=NOW + 60)
    assert not session.valid("another-key", value, now=NOW + 60)
    assert not session.valid(ADMIN_KEY, value, now=NOW + session.SESSION_SECONDS + 1)
    expires, _, signature = value.partition(".")
    assert not session.valid(ADMIN_KEY, f"{int(expires) + 3600}.{signature}", now=NOW)
    assert not session.valid(ADMIN_KEY, "", now=NOW) and not session.valid(ADMIN_KEY, "x.y", now=NOW)


@pytest.mark.anyio
async def test_dashboard_session_expires_and_the_key_still_works_as_a_bearer_header(setup: Setup) -> None:
    await signed_in(setup.client)
    setup.clock[0] = NOW + session.SESSION_SECONDS + 1
    assert (await setup.client.get("/admin/dashboard")).status_code == 401
    setup.client.cookies.clear()
    bearer = {"authorization": f"Bearer {ADMIN_KEY}"}
    assert (await setup.client.get("/admin/dashboard", headers=bearer)).status_code == 200


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("query", "said"),
    [
        ({"period": "fortnight"}, "period must be one of"),
        ({"period": "custom"}, "a custom period needs a start date"),
        ({"period": "custom", "from": "2026-11-31"}, "day is out of range"),
        ({"period": "custom", "from": "2026-11-30", "to": "2026-11-01"}, "must end after it starts"),
        ({"tenant": "a\x01b"}, "without control characters"),
        ({"stack": "provider"}, "stack must be model or tenant"),
        ({"tag": "team"}, "&#x27;team&#x27; is not key=value"),
    ],
)
async def test_dashboard_says_what_is_wrong_with_a_period_or_filter(
    setup: Setup, query: dict[str, str], said: str
) -> None:
    await signed_in(setup.client)
    answer = await setup.client.get("/admin/dashboard", params=query)
    assert answer.status_code == 400 and said in answer.text


# --- the figures -----------------------------------------------------------------------------------


def money(text: str) -> int:
    return nanos_from_usd(unescape(text).replace("$", "").replace(",", ""))


def table(page: str, ident: str) -> dict[str, list[str]]:
    """A table's rows by their first cell (the total row under ``Total``), cells as text."""
    found = re.search(rf"<table id='{ident}'>(.*?)</table>", page, re.S)
    assert found is not None, ident
    rows = {}
    for row in re.findall(r"<tr[^>]*>(.*?)</tr>", found.group(1), re.S):
        if "scope='col'" in row:  # the header
            continue
        cells = [re.sub(r"<[^>]+>", "", cell) for cell in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row, re.S)]
        rows[unescape(cells[0])] = cells[1:]
    return rows


def tile(page: str, ident: str) -> int:
    found = re.search(rf'id="{ident}" data-value="(-?\d+)"', page)
    assert found is not None, ident
    return int(found.group(1))


async def cli_summary(
    setup: Setup, capsys: pytest.CaptureFixture[str], redis_url: str, group_by: GroupBy, *args: str
) -> list[dict[str, object]]:
    code = await anyio.to_thread.run_sync(
        main,
        ["costs", "summary", "--format", "json", "--group-by", group_by, "--redis-url", redis_url,
         "--key-prefix", setup.prefix, *args]
    )  # fmt: skip
    assert code == 0
    rows: list[dict[str, object]] = orjson.loads(capsys.readouterr().out)
    return rows


def check_money_table(page: str, ident: str, rows: Sequence[dict[str, object]], group_by: str) -> None:
    shown = table(page, ident)
    expected = {str(row[group_by]): row for row in rows}
    assert set(shown) - {"Total"} == set(expected)
    for key, row in expected.items():
        cells = shown[key]
        assert int(cells[0].replace(",", "")) == row["requests"]
        assert money(cells[1]) == nanos_from_usd(str(row["cost_usd"]))
        assert money(cells[2]) == nanos_from_usd(str(row["counterfactual_usd"]))
        assert money(cells[3]) == nanos_from_usd(str(row["saving_usd"]))


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("query", "args"),
    [
        ({"period": "last_month"}, ["--from", "2026-11-01", "--to", "2026-11-30"]),
        (
            {"period": "custom", "from": "2026-11-30", "to": "2026-12-01"},
            ["--from", "2026-11-30", "--to", "2026-12-01"],
        ),
        (
            {"period": "custom", "from": "2026-10-31T12:00:00Z", "to": "2026-11-30T12:00:00Z"},
            ["--from", "2026-10-31T12:00:00Z", "--to", "2026-11-30T12:00:00Z"],
        ),
        (
            {"period": "last_month", "tenant": "beta"},
            ["--from", "2026-11-01", "--to", "2026-11-30", "--tenant", "beta"],
        ),
    ],
)
async def test_dashboard_totals_equal_gateway_costs_summary_to_the_nano_dollar(
    setup: Setup, capsys: pytest.CaptureFixture[str], redis_url: str, query: dict[str, str], args: list[str]
) -> None:
    await signed_in(setup.client)
    page = (await setup.client.get("/admin/dashboard", params=query)).text
    by_tenant = await cli_summary(setup, capsys, redis_url, "tenant", *args)
    by_model = await cli_summary(setup, capsys, redis_url, "model", *args)
    by_day = await cli_summary(setup, capsys, redis_url, "day", *args)
    check_money_table(page, "table-tenants", by_tenant, "tenant")
    check_money_table(page, "table-models", by_model, "model")
    cost = sum(nanos_from_usd(str(row["cost_usd"])) for row in by_tenant)
    assert tile(page, "total-cost") == cost > 0
    assert tile(page, "total-saving") == sum(nanos_from_usd(str(row["saving_usd"])) for row in by_tenant)
    assert tile(page, "total-counterfactual") == sum(
        nanos_from_usd(str(row["counterfactual_usd"])) for row in by_tenant
    )
    assert tile(page, "total-requests") == sum(int(str(row["requests"])) for row in by_model)
    days = table(page, "table-days")
    for row in by_day:
        assert money(days[str(row["day"])][-1]) == nanos_from_usd(str(row["cost_usd"]))


@pytest.mark.anyio
@pytest.mark.parametrize("period", ["today", "7d", "month"])
@pytest.mark.parametrize("model", [None, "gpt-5.4-mini"])
async def test_dashboard_named_periods_equal_the_summary_of_the_same_span(
    setup: Setup, period: str, model: str | None
) -> None:
    """Periods that end now: compared with ``summarize`` (what the command runs) over the same span."""
    await signed_in(setup.client)
    query = {"period": period, **({"model": model} if model else {})}
    page = (await setup.client.get("/admin/dashboard", params=query)).text
    chosen = choose(period, None, None, now_ms=int(NOW * 1000))
    tenants = await setup.reader.tenants()
    rows = await summarize(setup.reader, tenants=tenants, period=chosen.period, group_by="model")
    wanted = [row for row in rows if model is None or row.key == model]
    assert tile(page, "total-cost") == sum(row.counters.cost_nanos for row in wanted) > 0
    assert tile(page, "total-saving") == sum(row.counters.saving_nanos for row in wanted)
    inside = [e for e in EVENTS if chosen.period.start_ms <= e.time_ms < chosen.period.end_ms]
    assert tile(page, "total-requests") == len([e for e in inside if model is None or e.model == model])


def within(period: Period) -> list[CostEvent]:
    return [event for event in EVENTS if period.start_ms <= event.time_ms < period.end_ms]


@pytest.mark.anyio
async def test_dashboard_action_mix_bands_side_calls_and_conversations_follow_the_events(
    setup: Setup,
) -> None:
    await signed_in(setup.client)
    page = (await setup.client.get("/admin/dashboard", params={"period": "last_month"})).text
    events = within(choose("last_month", None, None, now_ms=int(NOW * 1000)).period)
    main = [event for event in events if side_kind(event) is None]
    side = [event for event in events if side_kind(event) is not None]
    assert len(main) + len(side) == len(events) and side and main
    actions = table(page, "table-actions")
    for action in (*ACTIONS, "reject"):
        mine = [event for event in main if event.action == action]
        assert int(actions[action][0]) == len(mine)
        assert money(actions[action][2]) == sum(event.cost_nanos for event in mine)
    for band in ("warning", "over_cliff", "below_warning"):
        expected = sum(1 for event in main if event.band == band)
        assert re.search(rf"id='band-{band}'>{expected}<", page), band
    sides = table(page, "table-side")
    assert set(sides) == {"summary", "shadow", "Total"}
    assert money(sides["summary"][1]) == sum(e.cost_nanos for e in side if e.id.endswith(":summary:1"))
    assert money(sides["shadow"][1]) == sum(e.cost_nanos for e in side if e.id.endswith(":compare"))
    conversations = table(page, "table-conversations")
    spent: dict[str, int] = {}
    for event in main:
        if event.conversation:
            spent[event.conversation] = spent.get(event.conversation, 0) + event.cost_nanos
    ranked = sorted(spent, key=lambda name: -spent[name])
    assert list(conversations) == ranked
    assert [money(conversations[name][5]) for name in ranked] == [spent[name] for name in ranked]
    basis = table(page, "table-basis")
    guessed = [event for event in main if event.estimated]
    assert money(basis["tenant_share (estimated)"][4]) == sum(event.saving_nanos for event in guessed) > 0
    estimated = re.search(r'id="saving-estimated">Of the saving, (\S+) rests', page)
    assert estimated is not None and money(estimated.group(1)) == sum(e.saving_nanos for e in guessed)
    assert "Behaviour map: gpt-5.4" in page and "/admin/costs?format=csv&amp;from=2026-11-01" in page
    assert "/admin/costs/models?format=html&amp;from=2026-11-01" in page
    assert "/admin/replay?format=html&amp;from=2026-11-01" in page


@pytest.mark.anyio
async def test_dashboard_filters_by_tenant_and_model_and_stacks_by_tenant(setup: Setup) -> None:
    await signed_in(setup.client)
    query = {"period": "last_month", "tenant": "alpha", "model": "gpt-5.4", "stack": "tenant"}
    page = (await setup.client.get("/admin/dashboard", params=query)).text
    period = choose("last_month", None, None, now_ms=int(NOW * 1000)).period
    mine = [e for e in within(period) if e.tenant == "alpha" and e.model == "gpt-5.4"]
    assert tile(page, "total-cost") == sum(e.cost_nanos for e in mine) > 0
    assert tile(page, "total-requests") == len(mine)
    days = table(page, "table-days")
    assert "<th scope='col'>alpha</th>" in page and "<th scope='col'>beta</th>" not in page
    assert money(days["2026-11-30"][0]) == sum(
        e.cost_nanos for e in mine if e.time_ms >= to_ms(datetime(2026, 11, 30))
    )
    assert '<option value="alpha" selected>' in page and '<option value="gpt-5.4" selected>' in page
    assert '<option value="gamma">' in page and '<option value="o-unused">' in page


@pytest.mark.anyio
async def test_dashboard_filters_by_tags_as_the_summary_by_tag_counts(
    setup: Setup, capsys: pytest.CaptureFixture[str], redis_url: str
) -> None:
    await signed_in(setup.client)
    query = {"period": "last_month", "tag": "team=search"}
    page = (await setup.client.get("/admin/dashboard", params=query)).text
    period = choose("last_month", None, None, now_ms=int(NOW * 1000)).period
    mine = [e for e in within(period) if (e.tags or {}).get("team") == "search"]
    assert any(side_kind(e) for e in mine) and len(mine) < len(within(period))
    assert tile(page, "total-cost") == sum(e.cost_nanos for e in mine) > 0
    assert tile(page, "total-requests") == len(mine)
    span = ["--from", "2026-11-01", "--to", "2026-11-30"]
    rows = await cli_summary(setup, capsys, redis_url, "tag:team", *span)
    search = next(row for row in rows if row["tag:team"] == "search")
    assert tile(page, "total-cost") == nanos_from_usd(str(search["cost_usd"]))
    assert "value='team=search'" in page and "--group-by tag:team" in page
    both = {"period": "last_month", "tag": "team=search, env=prod", "model": "gpt-5.4-mini"}
    narrower = (await setup.client.get("/admin/dashboard", params=both)).text
    assert tile(narrower, "total-requests") == sum(1 for e in mine if e.model == "gpt-5.4-mini") > 0


@pytest.mark.anyio
async def test_dashboard_budget_burn_and_month_end_forecast(setup: Setup) -> None:
    await signed_in(setup.client)
    page = (await setup.client.get("/admin/dashboard", params={"period": "today"})).text
    burn = table(page, "table-burn")
    december = [e for e in EVENTS if e.tenant == "alpha" and e.time_ms >= to_ms(datetime(2026, 12, 1))]
    spent = sum(e.cost_nanos for e in december)
    assert money(burn["alpha"][0]) == spent > 0
    assert burn["alpha"][2] == "$0.05 (hard)"
    assert burn["alpha"][3] == f"{100 * spent / 50_000_000:.1f}%"
    elapsed = int(NOW * 1000) - to_ms(datetime(2026, 12, 1))
    forecast = spent * 31 * 86_400_000 // elapsed
    assert money(burn["alpha"][4].removesuffix(" — over budget")) == forecast
    assert burn["alpha"][4].endswith("over budget") == (forecast > 50_000_000)
    assert burn["beta"][2] == "no budget" and "chart-burn" in page


@pytest.mark.anyio
@pytest.mark.parametrize("scan_limit", [10])
async def test_dashboard_says_when_it_read_only_the_first_events_and_keeps_the_totals_exact(
    setup: Setup, scan_limit: int
) -> None:
    await signed_in(setup.client)
    page = (await setup.client.get("/admin/dashboard", params={"period": "last_month"})).text
    period = choose("last_month", None, None, now_ms=int(NOW * 1000)).period
    inside = sorted(within(period), key=lambda event: event.time_ms)
    assert len(inside) > scan_limit
    assert "(from the first 10 events of the period only)" in page
    shown = sum(int(row[0]) for row in table(page, "table-actions").values())
    assert shown == sum(1 for event in inside[:scan_limit] if side_kind(event) is None)
    assert tile(page, "total-cost") == sum(event.cost_nanos for event in inside)


@pytest.mark.anyio
async def test_dashboard_of_a_period_without_events_shows_zeros_and_no_rows(setup: Setup) -> None:
    await signed_in(setup.client)
    query = {"period": "custom", "from": "2020-01-01", "to": "2020-01-02"}
    answer = await setup.client.get("/admin/dashboard", params=query)
    assert answer.status_code == 200
    page = answer.text
    assert tile(page, "total-cost") == 0 and tile(page, "total-requests") == 0
    assert set(table(page, "table-days")) == {"2020-01-01", "2020-01-02"}
    assert table(page, "table-conversations") == {} and set(table(page, "table-side")) == {"Total"}
    assert "gateway costs summary --from 2020-01-01 --to 2020-01-02 --group-by tenant" in page
