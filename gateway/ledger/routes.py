"""HTTP routes of the ledger: finance exports and summaries (admin key), and a tenant's own usage.

The gateway supplies the seams: ``require_admin(request)`` (raises ``AuthenticationFailed``),
``get_reader(request) -> LedgerSource`` (the archive or Redis: ``gateway.ledger.sources``) and
``get_tenant(request) -> Tenant`` (sync or async). Bad
query parameters raise ``InvalidRequest``, which the gateway's error handler renders.
"""

from __future__ import annotations

import inspect
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import Annotated, TypeVar

import orjson
from fastapi import APIRouter, Depends, Query, Request, Response
from fastapi.responses import StreamingResponse

from gateway.base.errors import InvalidRequest
from gateway.base.money import usd
from gateway.base.types import Tenant
from gateway.ledger.formats import (
    EXTENSIONS,
    FORMATS,
    MEDIA_TYPES,
    counters_row,
    encode_summary,
    summary_rows,
)
from gateway.ledger.period import Period, iso_time
from gateway.ledger.source import LedgerSource, TenantUsage
from gateway.ledger.summary import GroupBy, SummaryRow, basis_of, summarize, total
from gateway.ledger.summary import group_by as parse_group

T = TypeVar("T")
TenantOf = Callable[[Request], Tenant | Awaitable[Tenant]]
Clock = Callable[[], float]
FromParam = Annotated[str | None, Query(alias="from", description="date or ISO datetime (UTC), inclusive")]
ToParam = Annotated[str | None, Query(description="date (inclusive) or ISO datetime (exclusive)")]


def admin_router(
    *,
    require_admin: Callable[[Request], Awaitable[None]],
    get_reader: Callable[[Request], LedgerSource],
    tenant_names: Callable[[Request], Iterable[str]] | None = None,
    clock: Clock = time.time,
) -> APIRouter:
    """``GET /admin/costs`` (events, streamed) and ``GET /admin/costs/summary`` (totals)."""
    router = APIRouter(dependencies=[Depends(require_admin)], tags=["finance"])

    @router.get("/admin/costs")
    async def export_costs(
        request: Request,
        from_: FromParam = None,
        to: ToParam = None,
        tenant: str | None = None,
        format: str = "csv",
    ) -> StreamingResponse:
        fmt = _choice(format, FORMATS, "format")
        period = _period(from_, to, clock)
        reader = get_reader(request)
        tenant = _tenant_param(tenant)
        tenants = [tenant] if tenant is not None else await _tenants(request, reader, tenant_names)
        chunks = await _started(reader.export(tenants, period, fmt))  # a source that fails: 503, not a cut
        name = f"costs-{tenant or 'all'}-{iso_time(period.start_ms)[:10]}-{iso_time(period.end_ms - 1)[:10]}"
        return StreamingResponse(
            chunks,
            media_type=MEDIA_TYPES[fmt],
            headers={
                "content-disposition": f'attachment; filename="{_UNSAFE.sub("_", name)}.{EXTENSIONS[fmt]}"'
            },
        )

    @router.get("/admin/costs/summary")
    async def costs_summary(
        request: Request,
        from_: FromParam = None,
        to: ToParam = None,
        tenant: str | None = None,
        group_by: str = "tenant",
        format: str = "json",
    ) -> Response:
        try:
            group: GroupBy = parse_group(group_by)
        except ValueError as exc:
            raise InvalidRequest(f"invalid group_by: {exc}", param="group_by") from None
        fmt = _choice(format, ("json", "csv"), "format")
        period = _period(from_, to, clock)
        reader = get_reader(request)
        tenant = _tenant_param(tenant)
        tenants = [tenant] if tenant is not None else await _tenants(request, reader, tenant_names)
        rows = await summarize(reader, tenants=tenants, period=period, group_by=group)
        if fmt == "csv":
            csv = encode_summary(rows, "csv", group_by=group)
            return StreamingResponse(csv, media_type=MEDIA_TYPES["csv"])
        body = summary_body("gateway.cost_summary", period, group, rows)
        return Response(orjson.dumps(body), media_type="application/json")

    return router


def tenant_router(
    *,
    get_tenant: TenantOf,
    get_reader: Callable[[Request], LedgerSource],
    clock: Clock = time.time,
) -> APIRouter:
    """``GET /v1/gateway/usage``: the calling tenant's own spend, saving and budget; nobody else's.
    ``GET /v1/gateway/usage/history``: its spend over a period, by day, model or one of its cost tags, read
    from the archive when there is one (so it reaches back past Redis' window), else from Redis."""
    router = APIRouter(tags=["usage"])

    @router.get("/v1/gateway/usage/history")
    async def usage_history(
        request: Request, from_: FromParam = None, to: ToParam = None, group_by: str = "day"
    ) -> Response:
        try:
            group: GroupBy = parse_group(group_by)
        except ValueError as exc:
            raise InvalidRequest(f"invalid group_by: {exc}", param="group_by") from None
        if group == "tenant":
            raise InvalidRequest("invalid group_by: one of day, model or tag:<key>", param="group_by")
        period = _period(from_, to, clock)
        found = get_tenant(request)
        tenant = await found if inspect.isawaitable(found) else found
        rows = await summarize(get_reader(request), tenants=[tenant.name], period=period, group_by=group)
        body = summary_body("gateway.usage_history", period, group, rows, tenant=tenant.name)
        return Response(orjson.dumps(body), media_type="application/json")

    @router.get("/v1/gateway/usage")
    async def gateway_usage(request: Request) -> Response:
        found = get_tenant(request)
        tenant = await found if inspect.isawaitable(found) else found
        usage = await get_reader(request).usage(tenant.name, now_ms=int(clock() * 1000))
        return Response(orjson.dumps(usage_body(usage)), media_type="application/json")

    return router


def summary_body(
    kind: str, period: Period, group: GroupBy, rows: list[SummaryRow], **extra: str
) -> dict[str, object]:
    """A summary's JSON: the period, how it was read, a row per group and the total."""
    return {
        "object": kind,
        **extra,
        "from": iso_time(period.start_ms),
        "to": iso_time(period.end_ms),
        "group_by": group,
        "basis": basis_of(period, group),
        "data": summary_rows(rows, group_by=group),
        "total": counters_row(total(rows)),
    }


def usage_body(usage: TenantUsage) -> dict[str, object]:
    budget = usage.budget
    periods = {}
    for name, label, counters, limit in (
        ("day", usage.day, usage.today, budget.limit_nanos("daily") if budget else None),
        ("month", usage.month, usage.this_month, budget.limit_nanos("monthly") if budget else None),
    ):
        remaining = None if limit is None else max(0, limit - counters.cost_nanos - usage.reserved_nanos)
        periods[name] = {
            "period": label,
            "requests": counters.requests,
            "cost_usd": usd(counters.cost_nanos),
            "counterfactual_usd": usd(counters.cost_nanos + counters.saving_nanos),
            "saving_usd": usd(counters.saving_nanos),
            "budget_usd": None if limit is None else usd(limit),
            "remaining_usd": None if remaining is None else usd(remaining),
        }
    return {
        "object": "gateway.usage",
        "tenant": usage.tenant,
        **periods,
        "reserved_usd": usd(usage.reserved_nanos),
        "budget_enforced": bool(budget and budget.hard),
    }


_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
"""What a download's file name may not hold (it goes into a header, which must stay Latin-1 and one line)."""
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


async def _started(chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """The chunks, their source already asked for the first (so that its failure is an error answer)."""
    first = await anext(chunks, None)

    async def chained() -> AsyncIterator[bytes]:
        if first is not None:
            yield first
            async for chunk in chunks:
                yield chunk

    return chained()


def _tenant_param(tenant: str | None) -> str | None:
    if tenant is not None and (not tenant or _CONTROL.search(tenant)):
        raise InvalidRequest("tenant must be a non-empty name without control characters", param="tenant")
    return tenant


def _choice(value: str, allowed: tuple[T, ...], param: str) -> T:
    for option in allowed:
        if value == option:
            return option
    raise InvalidRequest(f"{param} must be one of {', '.join(map(str, allowed))}", param=param)


def _period(start: str | None, end: str | None, clock: Clock) -> Period:
    try:
        return Period.parse(start, end, now_ms=int(clock() * 1000))
    except (ValueError, OverflowError) as exc:  # OverflowError: a day past 9999-12-31
        raise InvalidRequest(f"invalid period: {exc}", param="from") from exc


async def _tenants(
    request: Request, reader: LedgerSource, tenant_names: Callable[[Request], Iterable[str]] | None
) -> list[str]:
    names = set(await reader.tenants())
    if tenant_names is not None:
        names.update(tenant_names(request))
    return sorted(names)
