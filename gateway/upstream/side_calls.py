"""An upstream call the gateway makes for a request (a summary, embeddings, a judge's verdict): sent like any
call, and recorded on the request's record as a side call, priced as its own cost event, whether it
answered or failed."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import orjson

from gateway.base.errors import GatewayError
from gateway.base.record import RequestRecord, SideCall
from gateway.base.types import Usage
from gateway.config.runtime import Route
from gateway.upstream.calls import send
from gateway.upstream.clients import UpstreamPool

UsageOf = Callable[[Any], Usage | None]
"""The usage of a reply's ``usage`` object, read the way its API writes it."""


async def side_call(
    pool: UpstreamPool,
    routes: Sequence[Route],
    *,
    path: str,
    body: Mapping[str, Any],
    record: RequestRecord,
    kind: str,
    model: str,
    usage_of: UsageOf,
) -> Any:
    """The JSON answer of ``body`` sent to the first of ``routes`` that answers (``model`` on each);
    recorded on ``record`` as a side call of ``kind`` either way."""
    started = time.perf_counter()
    try:
        exchange = await send(
            pool,
            routes,
            path=path,
            body_for=lambda route: orjson.dumps({**body, "model": route.upstream_model}),
            incoming_headers={},
            stream=False,
            expect_json=True,
        )
    except GatewayError as exc:
        record.side_calls.append(
            SideCall(kind, model, "", None, time.perf_counter() - started, exc.status_code)
        )
        raise
    data = exchange.data
    usage = usage_of(data.get("usage") if isinstance(data, Mapping) else None)
    record.side_calls.append(
        SideCall(
            kind,
            exchange.route.public_model,
            exchange.route.provider_name,
            usage,
            time.perf_counter() - started,
            exchange.response.status_code,
        )
    )
    return data
