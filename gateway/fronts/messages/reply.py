"""The answer to a Messages request, a whole body or a relayed stream, with the gateway's headers; and what
the gateway learns from it (usage Anthropic's way, the stop reason, the first delta, an ``error`` event).

Beside the gateway's ``x-gateway-*`` headers: ``x-gateway-prompt-tokens-approximate: true`` (Claude's
tokenizer is not public, so the gateway's counts are estimates), Anthropic's own rate-limit headers, and the
upstream's ``request-id`` as ``x-upstream-request-id``; ``request-id`` is the gateway's id, as the SDKs read
it. With ``report_prompt_tokens: received`` a rewritten request's usage shows the prompt as received: its
``input_tokens`` are what is left of the received count after the cache reads and writes.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import replace
from typing import Any

import httpx
import orjson
from starlette.responses import Response

from gateway.base.headroom import ANTHROPIC_PREFIX, OPENAI_PREFIX
from gateway.base.record import RequestRecord
from gateway.base.types import Usage
from gateway.core import replies
from gateway.core.body import json_object
from gateway.core.relay_response import RelayResponse
from gateway.experiments.notes import ANSWER, SHADOW_JOBS
from gateway.fronts.messages.stream import MessagesStreamReader, blocks_answer, finish_reason_of
from gateway.money.anthropic_usage import usage_from_anthropic
from gateway.servertools.reported import most
from gateway.upstream.calls import Exchange
from gateway.upstream.sse import EventRewriter, json_of, with_data

APPROXIMATE = "x-gateway-prompt-tokens-approximate"
PASSED_UPSTREAM_HEADERS = ("anthropic-ratelimit-", "retry-after")
CACHE_FIELDS = ("cache_read_input_tokens", "cache_creation_input_tokens")


def headers(
    record: RequestRecord, upstream: httpx.Response | None = None, extra: Mapping[str, str] | None = None
) -> dict[str, str]:
    out = replies.headers(record, upstream)
    out["request-id"] = record.request_id
    if record.prompt_tokens is not None or record.forwarded_tokens is not None:
        out[APPROXIMATE] = "true"
    headroom = record.headroom
    if headroom is not None:  # the caller's limits in Anthropic's names, none of the provider's
        for name in [name for name in out if name.startswith(OPENAI_PREFIX)]:
            del out[name]
        out.update(headroom.anthropic_headers())
    if upstream is not None:
        for name, value in upstream.headers.items():
            if name.startswith(PASSED_UPSTREAM_HEADERS) and not (
                headroom is not None and name.startswith(ANTHROPIC_PREFIX)
            ):
                out[name] = value
        upstream_id = upstream.headers.get("request-id")
        if upstream_id:
            out["x-upstream-request-id"] = upstream_id
    out.update(extra or {})
    return out


def complete(record: RequestRecord, exchange: Exchange, *, extra: Mapping[str, str]) -> Response:
    """A non-streaming answer: the upstream's bytes, unchanged (unless the usage is reported as received)."""
    upstream = exchange.response
    record.upstream_seconds = time.perf_counter() - exchange.started
    data = exchange.data
    if data is None and upstream.headers.get("content-type", "").startswith("application/json"):
        data = json_object(upstream.content)
    content = None
    if data is not None:
        usage = data.get("usage")
        record.usage = usage_from_anthropic(usage) if isinstance(usage, dict) else None
        record.finish_reason = finish_reason_of(data.get("stop_reason"))
        record.output_text_chars = sum(len(text) for text in _output_texts(data))
        if record.report_prompt_tokens is not None and isinstance(usage, dict):
            content = orjson.dumps({**data, "usage": reported(usage, record.report_prompt_tokens)})
    return Response(
        content=upstream.content if content is None else content,
        status_code=upstream.status_code,
        media_type=upstream.headers.get("content-type", "application/json"),
        headers=headers(record, upstream, extra),
    )


def relay(
    record: RequestRecord,
    exchange: Exchange,
    *,
    extra: Mapping[str, str],
    count_text: Callable[[str], int],
    done: Callable[[], None],
) -> RelayResponse:
    """Relay the upstream's events as they arrive. Whatever ends the stream (its end, a broken upstream,
    a client that went away), the upstream call is closed and ``done`` runs with what was learnt: a stream
    cut before its ``message_delta`` keeps ``message_start``'s input side (cache reads and writes) and
    is billed the output relayed so far, counted with ``count_text`` (estimated)."""
    upstream = exchange.response
    reader = MessagesStreamReader(started=exchange.started, collect=bool(record.note(SHADOW_JOBS)))
    reader.stamp = lambda _: replies.cost_fields(record, streamed_usage(reader, count_text))
    report = Reporter(record.report_prompt_tokens) if record.report_prompt_tokens is not None else None

    async def body() -> AsyncIterator[bytes]:
        finished = False
        try:
            async for chunk in upstream.aiter_raw():
                out = reader.feed(chunk)
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
            record.usage = streamed_usage(reader, count_text)
            if reader.error is not None:
                record.error_type = str(reader.error.get("type") or "api_error")
            if reader.collect:
                blocks = [reader.blocks[index] for index in sorted(reader.blocks)]
                record.put(ANSWER, blocks_answer(blocks, reader.stop_reason))
            done()

    return RelayResponse(
        body(),
        status_code=upstream.status_code,
        media_type=upstream.headers.get("content-type", "text/event-stream"),
        headers=headers(record, upstream, extra),
    )


def streamed_usage(reader: MessagesStreamReader, count_text: Callable[[str], int]) -> Usage | None:
    """What a stream reported; cut before its totals, with the output relayed counted (estimated) and
    the server-side tool uses it opened billed."""
    if reader.usage is None:
        return None
    usage = usage_from_anthropic(reader.usage)
    if reader.totals:
        return usage
    if reader.block_uses:
        usage = replace(usage, tool_uses=most(usage.tool_uses, reader.block_uses), estimated=True)
    if not reader.output_parts:
        return usage
    produced = count_text(reader.output_text)
    return replace(usage, output_tokens=max(usage.output_tokens, produced), estimated=True)


def reported(usage: Mapping[str, Any], received: int) -> dict[str, Any]:
    """Anthropic's ``usage`` with the prompt as received: the input tokens not read from or written to the
    cache are the rest of ``received``."""
    if not isinstance(usage.get("input_tokens"), int):
        return dict(usage)
    cached = sum(value for name in CACHE_FIELDS if isinstance(value := usage.get(name), int))
    return {**usage, "input_tokens": max(0, received - cached)}


class Reporter(EventRewriter):
    """The events of a stream, whole, with the usage of ``message_start`` and ``message_delta`` reported
    as received."""

    def __init__(self, received: int) -> None:
        super().__init__(lambda event: reported_event(event, received))


def reported_event(event: bytes, received: int) -> bytes:
    """``event`` with the usage it carries (``message_start``'s or ``message_delta``'s) as received."""
    if b'"input_tokens"' not in event:
        return event
    data = json_of(event)
    if data is None:
        return event
    if isinstance(data.get("usage"), dict):
        data = {**data, "usage": reported(data["usage"], received)}
    elif isinstance(message := data.get("message"), dict) and isinstance(message.get("usage"), dict):
        data = {**data, "message": {**message, "usage": reported(message["usage"], received)}}
    else:
        return event
    return with_data(event, data)


def _output_texts(data: Mapping[str, Any]) -> list[str]:
    content = data.get("content")
    texts: list[str] = []
    for block in content if isinstance(content, list) else ():
        if not isinstance(block, Mapping):
            continue
        for field in ("text", "thinking"):
            if isinstance(block.get(field), str):
                texts.append(block[field])
        if block.get("type") == "tool_use" and "input" in block:
            texts.append(orjson.dumps(block["input"]).decode())
    return texts
