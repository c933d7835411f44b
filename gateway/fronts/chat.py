"""The chat front (``POST /v1/chat/completions``): its body is chat messages already, so the core's steps
read it as it is (``core.front.CHAT``). The flow, step by step, that the other fronts' flows follow: read and
check the body, look it up in the tenant's response cache when it has one (``gateway.responsecache``), plan
(count, decide, hold, transform), send, note what was sent, answer (and keep the answer for the cache).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import httpx
from starlette.requests import Request
from starlette.responses import Response

from gateway.base.record import RequestRecord, notify_soon
from gateway.config.auth import allow_model
from gateway.config.runtime import Route
from gateway.core import body as bodies
from gateway.core import replies
from gateway.core.admission import Hold, admitted
from gateway.core.body import headers_of
from gateway.core.front import CHAT
from gateway.core.planning import Plan, planned_body
from gateway.core.shared_objects import chat_references, check_shared
from gateway.core.streaming import ChatStreamReader
from gateway.core.tags import request_tags
from gateway.experiments.answer import answer_of, streamed_chat_answer
from gateway.experiments.bounded import drain
from gateway.experiments.notes import ANSWER, SHADOW_JOBS
from gateway.experiments.replay import Reading
from gateway.money.usage import usage_from_openai
from gateway.responsecache.chat import ChatShape
from gateway.responsecache.flow import Lookup
from gateway.sampling.logprobs import LogprobTally
from gateway.servertools.allowance import check_allowed
from gateway.servertools.requested import chat_tools
from gateway.upstream.calls import Exchange, send

if TYPE_CHECKING:
    from gateway.proxy.pipeline import Pipeline


async def completions(pipeline: Pipeline, request: Request) -> Response:
    record = pipeline.begin(request, "chat")
    hold = Hold(pipeline.budgets)
    async with pipeline.failing(record, hold):
        runtime = pipeline.store.current
        record.tenant = pipeline.authenticate(runtime, request)
        raw = await bodies.read_body(request, runtime.config.limits.max_body_bytes)
        body = bodies.parse_object(raw)
        record.requested_model = model = bodies.check_chat(body)
        if record.tenant.models is not None:  # a managed key's allow-list
            allow_model(record.tenant, model)
        record.tags = request_tags(headers_of(request), record.tenant, body.get("metadata"))
        record.stream = body.get("stream") is True
        runtime.serving(model, "chat")  # 404 for an unknown model, 400 for an embedding one: no counting
        check_shared(runtime, record.tenant.name, chat_references(body))
        tools = chat_tools(body)
        if tools:
            tenant = runtime.config.tenants.get(record.tenant.name)
            check_allowed(tenant, tools, param="web_search_options")
        lookup: Lookup | None = None
        if record.tenant.name in runtime.response_caches:
            lookup = await pipeline.response_cache.look(
                runtime, record, CHAT_SHAPE, body, headers_of(request)
            )
            if lookup is not None and lookup.entry is not None:
                return pipeline.response_cache.answer(
                    record, lookup, pipeline.observers, include_usage=_include_usage(body)
                )
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
            attempt_log=record.attempt_log,
        )
    await pipeline.note_sent(runtime, record, plan, exchange, body)
    record.tool_uses = tools.held  # a search model searches once per request; usage does not say so
    if runtime.experiments.shadows:
        pipeline.experiments.watch(runtime, record, body, headers_of(request), CHAT, CHAT_REPLAY)
        if record.note(SHADOW_JOBS) and not record.stream:
            record.put(ANSWER, answer_of(exchange.data))
    if record.stream:
        response: Response = _relay_stream(
            pipeline, record, exchange, strip_usage_chunk=add_usage, logprobs=bool(body.get("logprobs"))
        )
    else:
        response = pipeline.respond(record, exchange)
    return response if lookup is None else pipeline.response_cache.keep(record, lookup, response)


def _relay_stream(
    pipeline: Pipeline,
    record: RequestRecord,
    exchange: Exchange,
    *,
    strip_usage_chunk: bool,
    logprobs: bool = False,
) -> Response:
    reader = ChatStreamReader(
        strip_usage_chunk=strip_usage_chunk,
        started=exchange.started,
        report_prompt_tokens=record.report_prompt_tokens,
        collect_calls=bool(record.note(SHADOW_JOBS)),
    )

    def done() -> None:
        if reader.collect_calls:
            record.put(ANSWER, streamed_chat_answer(reader.answer_text, reader.calls, reader.finish_reason))
        notify_soon(pipeline.observers, record)  # after the stream's last bytes are handed over

    return replies.relay(
        record, exchange, reader=reader, tally=LogprobTally() if logprobs else None, done=done
    )


class ChatReplay:
    """A shadow call's copy of a chat request (``experiments.replay.Replay``): a stream asks for its
    usage, and the answer is read as a chat completion or chunk stream."""

    def body(self, body: Mapping[str, Any], candidate: str) -> dict[str, Any]:
        copy = {**body, "model": candidate}
        copy.pop("store", None)
        return copy

    def content(self, raw: bytes, plan: Plan, route: Route, *, stream: bool) -> bytes:
        return planned_body(raw, plan, route, add_usage=stream)

    def read(self, data: Mapping[str, Any]) -> Reading:
        usage = data.get("usage")
        return Reading(answer_of(data), usage_from_openai(usage if isinstance(usage, dict) else None))

    async def read_stream(self, response: httpx.Response, *, started: float, limit: int) -> Reading:
        chat = ChatStreamReader(strip_usage_chunk=False, started=started, collect_calls=True)
        await drain(response, chat, limit)
        usage = chat.usage
        return Reading(
            streamed_chat_answer(chat.answer_text, chat.calls, chat.finish_reason),
            usage_from_openai(usage if isinstance(usage, dict) else None),
            chat.first_token_seconds,
        )


CHAT_REPLAY = ChatReplay()
CHAT_SHAPE = ChatShape()


def _include_usage(body: Mapping[str, Any]) -> bool:
    options = body.get("stream_options")
    return isinstance(options, dict) and options.get("include_usage") is True
