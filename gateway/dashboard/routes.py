"""``GET /admin/dashboard`` and its login: the page for a period and filters, behind the admin key.

The gateway supplies the seams: ``get_admin_key(request)`` (None: admin routes disabled),
``get_reader(request)`` (what the ledger is read through: ``figures.DashboardSource``),
``tenant_names`` and ``model_names`` (the configured ones, offered even before they spent anything),
and ``report_links`` (the behaviour maps and experiment reports there are).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from urllib.parse import parse_qs

from fastapi import APIRouter, Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from gateway.base.tags import parse_header
from gateway.dashboard import session
from gateway.dashboard.figures import (
    SCAN_LIMIT,
    DashboardSource,
    Stack,
    burns,
    grouped,
    read_cube,
    scan,
    stacked,
)
from gateway.dashboard.page import dashboard_page, login_page, message_page
from gateway.dashboard.periods import choose
from gateway.dashboard.view import ReportLink, View
from gateway.ledger.summary import basis_of, total

PATH = "/admin/dashboard"
LOGIN_BODY_LIMIT = 8192
HEADERS = {
    "cache-control": "no-store",
    "content-security-policy": (
        "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; form-action 'self'; "
        "frame-ancestors 'none'; base-uri 'none'"
    ),
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
}
Clock = Callable[[], float]


def _html(page: str, status: int = 200) -> HTMLResponse:
    return HTMLResponse(page, status_code=status, headers=HEADERS)


def signed_in(request: Request, admin_key: str, *, now: float) -> bool:
    """The request carries a valid session cookie or the admin key itself (``Authorization: Bearer``)."""
    if session.valid(admin_key, request.cookies.get(session.COOKIE), now=now):
        return True
    presented = request.headers.get("authorization", "").removeprefix("Bearer ").strip()
    return bool(presented) and session.key_matches(admin_key, presented)


def dashboard_router(
    *,
    get_admin_key: Callable[[Request], str | None],
    get_reader: Callable[[Request], DashboardSource],
    tenant_names: Callable[[Request], Iterable[str]],
    model_names: Callable[[Request], Iterable[str]],
    report_links: Callable[[Request], Awaitable[Sequence[ReportLink]]],
    clock: Clock = time.time,
    scan_limit: int = SCAN_LIMIT,
) -> APIRouter:
    """``scan_limit``: the events read for the figures the counters do not hold (``figures.SCAN_LIMIT``)."""
    router = APIRouter(tags=["dashboard"])

    def disabled() -> HTMLResponse:
        return _html(
            message_page(
                "Dashboard disabled", "Admin routes are disabled: set GATEWAY_ADMIN_KEY to enable them."
            ),
            403,
        )

    @router.get(PATH)
    async def dashboard(request: Request) -> Response:
        admin_key = get_admin_key(request)
        if not admin_key:
            return disabled()
        now = clock()
        if not signed_in(request, admin_key, now=now):
            return _html(login_page(), 401)
        params = request.query_params
        try:
            view = await _view(
                request,
                get_reader(request),
                period=params.get("period") or "month",
                start=params.get("from"),
                end=params.get("to"),
                tenant=_name(params.get("tenant"), "tenant"),
                model=_name(params.get("model"), "model"),
                stack=_stack(params.get("stack")),
                tags=parse_header(params.get("tag") or "") or None,
                now_ms=int(now * 1000),
                tenant_names=tenant_names,
                model_names=model_names,
                report_links=report_links,
                scan_limit=scan_limit,
            )
        except ValueError as exc:
            page = message_page("Cannot show that", f"{exc}. Go back and choose again.")
            return _html(page, 400)
        return _html(dashboard_page(view))

    @router.post(PATH + "/login")
    async def login(request: Request) -> Response:
        admin_key = get_admin_key(request)
        if not admin_key:
            return disabled()
        body = b""
        async for chunk in request.stream():
            body += chunk
            if len(body) > LOGIN_BODY_LIMIT:
                return _html(login_page("The form was too large."), 413)
        presented = parse_qs(body.decode("utf-8", "replace")).get("key", [""])[0].strip()
        if not presented or not session.key_matches(admin_key, presented):
            return _html(login_page("Incorrect admin key."), 401)
        answer = RedirectResponse(PATH, status_code=303, headers=HEADERS)
        answer.set_cookie(
            session.COOKIE,
            session.issue(admin_key, now=clock()),
            max_age=session.SESSION_SECONDS,
            path="/admin",
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
        )
        return answer

    @router.post(PATH + "/logout")
    async def logout(request: Request) -> Response:
        answer = RedirectResponse(PATH, status_code=303, headers=HEADERS)
        answer.delete_cookie(
            session.COOKIE,
            path="/admin",
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
        )
        return answer

    return router


def _name(value: str | None, what: str) -> str | None:
    if not value:
        return None
    if any(ord(character) < 32 or ord(character) == 127 for character in value) or len(value) > 200:
        raise ValueError(f"a {what} name is at most 200 characters, without control characters")
    return value


def _stack(value: str | None) -> Stack:
    if value in (None, "", "model"):
        return "model"
    if value == "tenant":
        return "tenant"
    raise ValueError("stack must be model or tenant")


async def _view(
    request: Request,
    reader: DashboardSource,
    *,
    period: str,
    start: str | None,
    end: str | None,
    tenant: str | None,
    model: str | None,
    stack: Stack,
    tags: dict[str, str] | None,
    now_ms: int,
    tenant_names: Callable[[Request], Iterable[str]],
    model_names: Callable[[Request], Iterable[str]],
    report_links: Callable[[Request], Awaitable[Sequence[ReportLink]]],
    scan_limit: int,
) -> View:
    chosen = choose(period, start, end, now_ms=now_ms)
    known = sorted(set(await reader.tenants()) | set(tenant_names(request)))
    tenants = [tenant] if tenant is not None else known
    cube = await read_cube(reader, tenants=tenants, period=chosen.period, tags=tags)
    by_tenant = grouped(cube, "tenant", model=model)
    return View(
        chosen=chosen,
        basis=basis_of(chosen.period, f"tag:{next(iter(tags))}" if tags else "tenant"),
        tenant=tenant,
        model=model,
        stack=stack,
        tenants=known,
        models=sorted({cell[2] for cell in cube} | set(model_names(request)) | ({model} if model else set())),
        total=total(by_tenant),
        by_tenant=by_tenant,
        by_model=grouped(cube, "model", model=model),
        days=chosen.period.days(),
        per_day=stacked(cube, stack, model=model),
        scan=await scan(
            reader, tenants=tenants, period=chosen.period, model=model, limit=scan_limit, tags=tags
        ),
        burns=await burns(reader, tenants, now_ms=now_ms),
        links=await report_links(request),
        now_ms=now_ms,
        tags=tags,
    )
