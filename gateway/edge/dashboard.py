"""The cost dashboard's seams (``gateway.dashboard.routes``): the admin key, the ledger's reader, the
configured tenants and models, and links to the reports there are: each sampled model's behaviour map and
each configured experiment's report."""

from __future__ import annotations

from urllib.parse import quote, urlencode

import structlog
from fastapi import APIRouter
from redis.exceptions import RedisError
from starlette.requests import Request

from gateway.dashboard.figures import DashboardSource
from gateway.dashboard.routes import dashboard_router
from gateway.dashboard.view import ReportLink
from gateway.edge.routes import state_of, tenant_names
from gateway.sampling.keys import SamplingKeys
from gateway.sampling.report.reader import SampleReader

log = structlog.get_logger("gateway.dashboard")


def _admin_key(request: Request) -> str | None:
    return state_of(request).settings.admin_key


def _reader(request: Request) -> DashboardSource:
    return state_of(request).reader


def _models(request: Request) -> list[str]:
    return list(state_of(request).store.current.routes)


async def report_links(request: Request) -> list[ReportLink]:
    state = state_of(request)
    config = state.store.current.config
    links = []
    try:
        sampled = await SampleReader(state.redis, keys=SamplingKeys(config.sampling.key_prefix)).models()
    except RedisError:  # the page still shows the costs; the links come back with Redis
        log.warning("dashboard_links_unavailable")
        sampled = []
    for model in sampled:
        query = urlencode({"model": model, "format": "html"})
        links.append(ReportLink(f"Behaviour map: {model}", f"/admin/probes/report?{query}"))
    for name in sorted(config.experiments):
        href = f"/admin/experiments/{quote(name, safe='')}/report?format=html"
        links.append(ReportLink(f"Experiment report: {name}", href))
    return links


def router() -> APIRouter:
    return dashboard_router(
        get_admin_key=_admin_key,
        get_reader=_reader,
        tenant_names=tenant_names,
        model_names=_models,
        report_links=report_links,
    )
