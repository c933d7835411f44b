"""The chat front (``POST /v1/chat/completions``): its body is chat messages already, so the core's steps
read it as it is (``planning.CHAT``). The flow, step by step, that the other fronts' flows follow: read and
check the body, plan (count, decide, hold, transform), send, note what was sent, answer.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import Response

from gateway import body as bodies
from gateway import replies
from gateway.admission import Hold, admitted
from gateway.body import headers_of
from gateway.experiments.answer import answer_of
from gateway.planning import CHAT, planned_body
from gateway.record import RequestRecord, notify
from gateway.sampling.logprobs import LogprobTally
from gateway.servertools.allowance import check_allowed
from gateway.servertools.requested import chat_tools
from gateway.shared_objects import chat_references, check_shared
from gateway.streaming import ChatStreamReader
from gateway.upstream import Exchange, send

if TYPE_CHECKING:
    from gateway.pipeline import Pipeline


async def completions(pipeline: Pipeline, request: Request) -> Response:
    record = pipeline.begin(request, "chat")
    hold = Hold(pipeline.budgets)
    async with pipeline.failing(record, hold):
        runtime = pipeline.store.current
        record.tenant = pipeline.authenticate(runtime, request)
        raw = await bodies.read_body(request, runtime.config.limits.max_body_bytes)
        body = bodies.parse_object(raw)
        record.requested_model = model = bodies.check_chat(body)
        record.stream = body.get("stream") is True
        runtime.serving(model, "chat")  # 404 for an unknown model, 400 for an embedding one: no counting
        check_shared(runtime, record.tenant.name, chat_references(body))
        tools = chat_tools(body)
        if tools:
            tenant = runtime.config.tenants.get(record.tenant.name)
            check_allowed(tenant, tools, param="web_search_options")
        if runtime.experiments.splits:
            routed = await pipeline.experiments.route(
                runtime, record, body, headers_of(request), lambda: body["messages"]
            )
            if routed is not None:
                record.routed_model = model = routed
        plan = await pipeline.plan(runtime, request, record, hold, body, len(raw), model=model, tools=tools)
        add_usage = record.stream and not _include_usage(body)
        exchange = await send(
            pipeline.pool,
            admitted(runtime, plan, model),
            path="/chat/completions",
            body_for=lambda route: planned_body(raw, plan, route, add_usage=add_usage),
            incoming_headers=headers_of(request),
            stream=record.stream,
            expect_json=not record.stream,
        )
    await pipeline.note_sent(runtime, record, plan, exchange, body)
    record.tool_uses = tools.held  # a search model searches once per request; usage does not say so
    if runtime.experiments.shadows:
        pipeline.experiments.watch(runtime, record, body, headers_of(request), CHAT)
        if record.shadow_jobs and not record.stream:
            record.answer = answer_of(exchange.data)
    if record.stream:
        return _relay_stream(
            pipeline, record, exchange, strip_usage_chunk=add_usage, logprobs=bool(body.get("logprobs"))
        )
    return pipeline.respond(record, exchange)


def _relay_stream(
    pipeline: Pipeline,
    record: RequestRecord,
    exchange: Exchange,
    *,
    strip_usage_chunk: bool,
    logprobs: bool = False,
) -> Response:
    return replies.relay(
        record,
        exchange,
        reader=ChatStreamReader(
            strip_usage_chunk=strip_usage_chunk,
            started=exchange.started,
            report_prompt_tokens=record.report_prompt_tokens,
            collect_calls=bool(record.shadow_jobs),
        ),
        tally=LogprobTally() if logprobs else None,
        done=lambda: notify(pipeline.observers, record),
    )


def _include_usage(body: Mapping[str, Any]) -> bool:
    options = body.get("stream_options")
    return isinstance(options, dict) and options.get("include_usage") is True
