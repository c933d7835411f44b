"""``GET /admin/experiments`` (the configured experiments and their spend today) and
``GET /admin/experiments/{name}/report?since=7d&format=json|html`` (primary against candidate by context
bucket, the projected monthly cost difference, the verdicts).

The gateway supplies the seams: ``require_admin(request)``, ``get_redis(request)`` and ``get_config(request)``
(the current ``GatewayConfig``: its experiments, the ledger's key prefix, the sampling buckets). A name that
is neither configured nor has data is 404 ``experiment_not_found``; an experiment removed from the config
still has its report while its data lasts. Decoding the pairs, building the report and rendering it run in
worker threads, never on the event loop that serves the gateway's requests.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

import anyio
import orjson
from fastapi import APIRouter, Depends, Request, Response
from redis.asyncio import Redis

from gateway.base.errors import InvalidRequest, NotFound
from gateway.config.schema.root import GatewayConfig
from gateway.experiments.report.html import render_html
from gateway.experiments.report.reading import Setting, list_experiments, read_report
from gateway.experiments.report.report import ExperimentReport, report_document
from gateway.sampling.since import parse_since

DEFAULT_SINCE = "7d"


def admin_router(
    *,
    require_admin: Callable[[Request], Awaitable[None]],
    get_redis: Callable[[Request], Redis],
    get_config: Callable[[Request], GatewayConfig | None],
    clock: Callable[[], float] = time.time,
) -> APIRouter:
    router = APIRouter(dependencies=[Depends(require_admin)], tags=["experiments"])

    @router.get("/admin/experiments")
    async def experiments(request: Request) -> Response:
        setting = Setting.of(get_config(request))
        now_ms = int(clock() * 1000)
        listed = await list_experiments(get_redis(request), setting=setting, now_ms=now_ms)
        body = {"object": "list", "data": [item.document() for item in listed]}
        return Response(orjson.dumps(body), media_type="application/json")

    @router.get("/admin/experiments/{name}/report")
    async def experiment_report(
        request: Request, name: str, since: str = DEFAULT_SINCE, format: str = "json"
    ) -> Response:
        if format not in ("json", "html"):
            raise InvalidRequest("format must be one of json, html", param="format")
        now = clock()
        try:
            start = parse_since(since, now=now)
        except ValueError as exc:
            raise InvalidRequest(f"invalid since: {exc}", param="since") from exc
        until_ms = int(now * 1000) + 1
        since_ms = min(int(start * 1000), until_ms - 1)
        setting = Setting.of(get_config(request))
        report = await read_report(
            get_redis(request), name=name, setting=setting, since_ms=since_ms, until_ms=until_ms
        )
        if report is None:
            raise NotFound(
                f"No experiment named {name!r}: none is configured and none has data.",
                param="name",
                code="experiment_not_found",
            )
        if format == "html":
            page = await anyio.to_thread.run_sync(render_html, report)
            return Response(page, media_type="text/html; charset=utf-8")
        document = await anyio.to_thread.run_sync(_json, report)
        return Response(document, media_type="application/json")

    return router


def _json(report: ExperimentReport) -> bytes:
    return orjson.dumps(report_document(report))
