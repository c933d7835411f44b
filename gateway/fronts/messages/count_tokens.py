"""``POST /v1/messages/count_tokens``: how many input tokens a Messages request holds.

Clients decide on this number when to compact their conversation (Claude Code does), so an answer below
the truth lets a conversation run into the window or over a price line. The gateway counts the request
itself (an estimate: Claude's tokenizer is not public) and, when the model's provider offers the count
(``messages_count_tokens: true``), asks it too; the answer is the larger of the two, never less than the
gateway's own count. Counting is not billed: no cost event, no budget hold; it is limited per tenant, its
body capped, and refused to a tenant whose hard budget is spent (``gateway.proxy.count_calls``).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

import anyio.to_thread
import orjson
from starlette.requests import Request
from starlette.responses import Response

from gateway.base.record import notify_soon
from gateway.config.auth import allow_model
from gateway.core import body as bodies
from gateway.core.admission import Hold
from gateway.core.body import headers_of
from gateway.core.shared_objects import check_shared
from gateway.fronts.messages import reply
from gateway.fronts.messages.confirm import offers_count, provider_count
from gateway.fronts.messages.front import MESSAGES, check_messages
from gateway.fronts.messages.pipeline import anthropic_routes
from gateway.fronts.messages.references import messages_references
from gateway.proxy.count_calls import admitted_body, check_budget_left

if TYPE_CHECKING:
    from gateway.proxy.pipeline import Pipeline


async def count_tokens(pipeline: Pipeline, request: Request) -> Response:
    record = pipeline.begin(request, "messages_count_tokens")
    hold = Hold(pipeline.budgets)
    async with pipeline.failing(record, hold):
        runtime = pipeline.store.current
        record.tenant = pipeline.authenticate(runtime, request)
        raw = await admitted_body(pipeline.count_limiter, runtime, record, request)
        body = bodies.parse_object(raw)
        record.requested_model = model = check_messages(body, require_max_tokens=False)
        if record.tenant.models is not None:  # a managed key's allow-list
            allow_model(record.tenant, model)
        route = anthropic_routes(runtime.serving(model, "chat"), model)[0]
        check_shared(runtime, record.tenant.name, messages_references(body))
        await check_budget_left(hold, runtime, record, headers_of(request))
        count = MESSAGES.count
        if len(raw) < runtime.config.counting.offload_bytes:
            estimate = count(runtime.counter, model, body).total
        else:
            estimate = (
                await anyio.to_thread.run_sync(functools.partial(count, runtime.counter, model, body))
            ).total
        confirmed = None
        if offers_count(route):
            headers = headers_of(request)
            confirmed = await provider_count(pipeline.pool, route, body, headers, query=request.url.query)
    record.prompt_tokens = estimate
    record.confirmed_tokens = confirmed
    record.provider = route.provider_name
    record.status = 200
    notify_soon(pipeline.observers, record)
    tokens = max(estimate, confirmed or 0)
    return Response(
        orjson.dumps({"input_tokens": tokens}),
        media_type="application/json",
        headers=reply.headers(record),
    )
