"""``GET /admin/probes/report?model=…&since=…``: the behaviour map of one model (JSON, or HTML with
``format=html``); without ``model``, the models that have samples.

The gateway supplies the seams: ``require_admin(request)`` and ``get_redis(request)``, and optionally
``get_config(request)`` (the current ``SamplingConfig``, for buckets and boundary settings).

A report covers up to 200,000 samples: parsing them, building the report and rendering it run in worker
threads, never on the event loop that serves the gateway's requests.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from functools import partial

import anyio
import orjson
from fastapi import APIRouter, Depends, Request, Response
from redis.asyncio import Redis

from gateway.base.errors import InvalidRequest
from gateway.config.schema.sampling import SamplingConfig
from gateway.sampling.keys import SamplingKeys
from gateway.sampling.report.document import report_document
from gateway.sampling.report.html import render_html
from gateway.sampling.report.reader import SampleReader
from gateway.sampling.report.report import BehaviourReport, build_report
from gateway.sampling.since import parse_since

DEFAULT_SINCE = "7d"


def admin_router(
    *,
    require_admin: Callable[[Request], Awaitable[None]],
    get_redis: Callable[[Request], Redis],
    get_config: Callable[[Request], SamplingConfig] | None = None,
    clock: Callable[[], float] = time.time,
) -> APIRouter:
    router = APIRouter(dependencies=[Depends(require_admin)], tags=["sampling"])

    @router.get("/admin/probes/report")
    async def probes_report(
        request: Request, model: str | None = None, since: str = DEFAULT_SINCE, format: str = "json"
    ) -> Response:
        if format not in ("json", "html"):
            raise InvalidRequest("format must be one of json, html", param="format")
        config = get_config(request) if get_config is not None else SamplingConfig()
        reader = SampleReader(get_redis(request), keys=SamplingKeys(config.key_prefix))
        if model is None:
            body = {"object": "list", "data": [{"model": name} for name in await reader.models()]}
            return Response(orjson.dumps(body), media_type="application/json")
        now = clock()
        try:
            start = parse_since(since, now=now)
        except ValueError as exc:
            raise InvalidRequest(f"invalid since: {exc}", param="since") from exc
        report = await read_report(reader, model=model, since=start, until=now, config=config)
        if format == "html":
            page = await anyio.to_thread.run_sync(render_html, report)
            return Response(page, media_type="text/html; charset=utf-8")
        document = await anyio.to_thread.run_sync(_json, report)
        return Response(document, media_type="application/json")

    return router


async def read_report(
    reader: SampleReader, *, model: str, since: float, until: float, config: SamplingConfig
) -> BehaviourReport:
    since_ms, until_ms = int(since * 1000), int(until * 1000) + 1
    signals = await reader.samples(model, since_ms=since_ms, until_ms=until_ms)
    probes = await reader.probes(model, since_ms=since_ms, until_ms=until_ms)
    build = partial(build_report, signals, probes, model=model, since=since, until=until, config=config)
    return await anyio.to_thread.run_sync(build)


def _json(report: BehaviourReport) -> bytes:
    return orjson.dumps(report_document(report))
