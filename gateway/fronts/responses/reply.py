"""The answer to a Responses request, a whole body or a relayed stream, with the gateway's headers; and
what the gateway learns from it (usage, the response's id, how it ended, the first output delta).

``remember(response_id, response)`` runs once the response's usage is known, before its last bytes go to
the client, so that a next turn chained to it (``previous_response_id``) finds it remembered; and when a
stream ends before its final event (a background response goes on running upstream).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import anyio
import httpx
from starlette.responses import Response

from gateway.base.record import RequestRecord
from gateway.core import replies
from gateway.core.body import json_object
from gateway.core.relay_response import RelayResponse
from gateway.core.usage_report import rewrite_event
from gateway.experiments.notes import ANSWER, SHADOW_JOBS
from gateway.fronts.responses.memory import Remember
from gateway.fronts.responses.stream import ResponsesStreamReader, answer_of, finish_reason_of
from gateway.money.usage import usage_from_openai
from gateway.servertools.reported import response_uses
from gateway.upstream.calls import Exchange
from gateway.upstream.sse import EventRewriter


async def complete(record: RequestRecord, exchange: Exchange, *, remember: Remember) -> Response:
    """A non-streaming answer: the upstream's bytes, unchanged."""
    upstream = exchange.response
    record.upstream_seconds = time.perf_counter() - exchange.started
    data = exchange.data
    if data is None and upstream.headers.get("content-type", "").startswith("application/json"):
        data = json_object(upstream.content)
    if data is not None:
        record.usage = usage_from_openai(data.get("usage"))
        record.tool_uses = response_uses(data)
        record.finish_reason = finish_reason_of(data)
        record.output_text_chars = sum(len(text) for text in _output_texts(data))
        if isinstance(data.get("id"), str) and upstream.status_code < 300:
            await remember(data["id"], data)
    return replies.answer(record, upstream, replies.reported_content(record, data))


def relay(
    record: RequestRecord, exchange: Exchange, *, remember: Remember, done: Callable[[], None]
) -> RelayResponse:
    """Relay the upstream's events as they arrive. Whatever ends the stream, the upstream call is closed
    and ``done`` runs with what was learnt."""
    upstream = exchange.response
    reader = ResponsesStreamReader(started=exchange.started)
    reader.stamp = lambda usage: _cost_fields(record, reader, usage)
    report = Reporter(record.report_prompt_tokens) if record.report_prompt_tokens is not None else None

    async def body() -> AsyncIterator[bytes]:
        finished = False
        try:
            async for chunk in upstream.aiter_raw():
                final = reader.final
                out = reader.feed(chunk)
                if reader.final and not final:
                    await _remember(record, reader, remember)
                if report is not None:
                    out = report.feed(out)
                if out:
                    yield out
            rest = reader.flush()
            if report is not None:
                rest = report.feed(rest) + report.rest()
            if rest:
                yield rest
            finished = True
        except httpx.HTTPError:
            record.error_type = "upstream_stream_broken"
        finally:
            await replies.close_stream(record, exchange, reader, finished=finished)
            record.tool_uses = reader.tool_uses
            if not reader.final and reader.response_id is not None:
                with anyio.CancelScope(shield=True):
                    await remember(reader.response_id, reader.response)
            if record.note(SHADOW_JOBS):
                record.put(ANSWER, answer_of(reader.response))
            done()

    return RelayResponse(
        body(),
        status_code=upstream.status_code,
        media_type=upstream.headers.get("content-type", "text/event-stream"),
        headers=replies.headers(record, upstream),
    )


class Reporter(EventRewriter):
    """The events of a stream, whole, with the final event's usage as the tenant asked it reported."""

    def __init__(self, received: int) -> None:
        super().__init__(lambda event: rewrite_event(event, received) if b'"usage"' in event else event)


def _cost_fields(
    record: RequestRecord, reader: ResponsesStreamReader, usage: Mapping[str, Any]
) -> Mapping[str, str]:
    """The request's cost at its final event, its tool uses counted as the ledger will count them."""
    record.tool_uses = reader.tool_uses
    return replies.cost_fields(record, usage_from_openai(usage))


async def _remember(record: RequestRecord, reader: ResponsesStreamReader, remember: Remember) -> None:
    if reader.response_id is None:
        return
    record.usage = usage_from_openai(reader.usage)
    await remember(reader.response_id, reader.response)


def _output_texts(data: Mapping[str, Any]) -> list[str]:
    texts: list[str] = []
    output = data.get("output")
    for item in output if isinstance(output, list) else ():
        content = item.get("content") if isinstance(item, Mapping) else None
        for part in content if isinstance(content, list) else ():
            if isinstance(part, Mapping) and isinstance(part.get("text"), str):
                texts.append(part["text"])
    return texts
