"""``GET /metrics``: the Prometheus text of all the workers; open unless ``GATEWAY_METRICS_KEY`` is set."""

from __future__ import annotations

import hmac

import anyio
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.requests import Request
from starlette.responses import Response

from gateway.base.errors import AuthenticationFailed
from gateway.edge.routes import state_of


async def scrape(request: Request) -> Response:
    state = state_of(request)
    key = state.settings.metrics_key
    if key:
        presented = request.headers.get("authorization", "").removeprefix("Bearer ").strip()
        if not hmac.compare_digest(presented.encode(), key.encode()):
            raise AuthenticationFailed("Incorrect or missing metrics key.")
    metrics = state.metrics
    metrics.refresh()  # this worker's gauges as of now; the others' as of their last refresh
    body = await anyio.to_thread.run_sync(metrics.render)
    return Response(body, media_type=CONTENT_TYPE_LATEST)
