"""Admin routes of the analyses: ``GET /admin/costs/models`` (the total-cost view), and replay:
``GET /admin/replay`` (under the config in force) and ``POST /admin/replay`` (under the candidate config
in the body, YAML)."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated

import orjson
from fastapi import APIRouter, Depends, Query, Request, Response

from gateway.analysis import replay_report
from gateway.analysis.candidate import Candidate, parse_candidate
from gateway.analysis.costs import cost_view, document
from gateway.analysis.costs_render import page
from gateway.analysis.replay import replay
from gateway.analysis.window import window
from gateway.base.errors import InvalidRequest
from gateway.config.schema.root import GatewayConfig
from gateway.ledger.period import Period, iso_time
from gateway.ledger.source import LedgerSource
from policies import PolicyEngine

Clock = Callable[[], float]
MAX_CANDIDATE_BYTES = 1_048_576
FromParam = Annotated[str | None, Query(alias="from", description="date or ISO datetime (UTC), inclusive")]


def period_of(since: str | None, start: str | None, end: str | None, clock: Clock) -> Period:
    try:
        return window(since, start, end, now_ms=int(clock() * 1000))
    except ValueError as exc:
        raise InvalidRequest(f"invalid period: {exc}", param="since") from exc


def format_of(value: str) -> str:
    if value not in ("json", "html"):
        raise InvalidRequest("format must be one of json, html", param="format")
    return value


async def tenants_of(reader: LedgerSource, tenant: str | None) -> list[str]:
    if tenant is not None:
        if not tenant or any(ord(char) < 32 for char in tenant):
            raise InvalidRequest("tenant must be a non-empty name without control characters", param="tenant")
        return [tenant]
    return await reader.tenants()


def admin_router(
    *,
    require_admin: Callable[[Request], Awaitable[None]],
    get_reader: Callable[[Request], LedgerSource],
    get_config: Callable[[Request], GatewayConfig],
    get_engine: Callable[[Request], PolicyEngine],
    clock: Clock = time.time,
) -> APIRouter:
    router = APIRouter(dependencies=[Depends(require_admin)], tags=["analysis"])

    @router.get("/admin/costs/models")
    async def cost_per_model(
        request: Request,
        since: str | None = None,
        from_: FromParam = None,
        to: str | None = None,
        tenant: str | None = None,
        format: str = "json",
    ) -> Response:
        fmt = format_of(format)
        period = period_of(since, from_, to, clock)
        reader, config = get_reader(request), get_config(request)
        events = reader.merged_events(await tenants_of(reader, tenant), period)
        view = await cost_view(events, config)
        body = document(
            view, config, period={"from": iso_time(period.start_ms), "to": iso_time(period.end_ms)}
        )
        if fmt == "html":
            return Response(page(body), media_type="text/html; charset=utf-8")
        return Response(
            orjson.dumps({"object": "gateway.cost_per_model", **body}), media_type="application/json"
        )

    async def replayed(
        request: Request,
        candidate: Candidate,
        start: str | None,
        end: str | None,
        tenant: str | None,
        fmt: str,
    ) -> Response:
        try:
            period = Period.parse(start, end, now_ms=int(clock() * 1000))
        except ValueError as exc:
            raise InvalidRequest(f"invalid period: {exc}", param="from") from exc
        reader = get_reader(request)
        tenants = await tenants_of(reader, tenant)
        result = await replay(
            lambda: reader.merged_events(tenants, period), candidate.config, candidate.engine
        )
        body = replay_report.document(
            result,
            period={"from": iso_time(period.start_ms), "to": iso_time(period.end_ms)},
            candidate=candidate.name,
        )
        if fmt == "html":
            return Response(replay_report.page(body), media_type="text/html; charset=utf-8")
        return Response(orjson.dumps(body), media_type="application/json")

    @router.get("/admin/replay")
    async def replay_live(
        request: Request,
        from_: FromParam = None,
        to: str | None = None,
        tenant: str | None = None,
        format: str = "json",
    ) -> Response:
        fmt = format_of(format)
        live = Candidate("the config in force", get_config(request), get_engine(request))
        return await replayed(request, live, from_, to, tenant, fmt)

    @router.post("/admin/replay")
    async def replay_candidate(
        request: Request,
        from_: FromParam = None,
        to: str | None = None,
        tenant: str | None = None,
        format: str = "json",
    ) -> Response:
        fmt = format_of(format)
        raw = await request.body()
        if len(raw) > MAX_CANDIDATE_BYTES:
            raise InvalidRequest(f"a candidate config is at most {MAX_CANDIDATE_BYTES:,} bytes", param="body")
        try:
            text = raw.decode("utf-8")
            candidate = parse_candidate(text, Path("candidate.yaml"), {})
        except (UnicodeDecodeError, ValueError) as exc:
            raise InvalidRequest(f"the candidate config was rejected: {exc}", code="invalid_config") from exc
        return await replayed(request, candidate, from_, to, tenant, fmt)

    return router
