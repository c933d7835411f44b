"""Step 10: the answer to the client, a whole body or a relayed stream, with the gateway's headers; and
what the gateway learns from it on the way (usage, finish reason, first token, logprobs).

A stream's headers leave before its usage, so the cost they give is an estimate; the event that brings
the usage (chat's usage chunk, Responses' final event, Messages' ``message_delta``) carries the exact
figure in its ``usage``, in fields the official SDKs keep beside the ones they know (``cost_fields``)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any, Protocol

import anyio
import httpx
from starlette.responses import Response

from gateway.base.headroom import OPENAI_PREFIX
from gateway.base.record import RequestRecord
from gateway.base.types import Usage
from gateway.core.body import json_object
from gateway.core.relay_response import RelayResponse
from gateway.core.streaming import ChatStreamReader
from gateway.core.usage_report import rewrite_answer
from gateway.money.usage import usage_from_openai
from gateway.sampling.logprobs import LogprobTally, completion_logprobs
from gateway.upstream.calls import Exchange

PASSED_UPSTREAM_HEADERS = ("openai-processing-ms", "openai-version", "x-ratelimit-")


def headers(record: RequestRecord, upstream: httpx.Response | None = None) -> dict[str, str]:
    out = {
        "x-request-id": record.client_request_id or record.request_id,
        "x-gateway-request-id": record.request_id,
        "x-gateway-action": record.action,
    }
    if record.called_model:
        out["x-gateway-model"] = record.called_model
    if record.prompt_tokens is not None:
        out["x-gateway-prompt-tokens"] = str(record.prompt_tokens)
    if record.forwarded_tokens is not None:
        out["x-gateway-forwarded-tokens"] = str(record.forwarded_tokens)
    if record.confirmed_tokens is not None:
        out["x-gateway-confirmed-tokens"] = str(record.confirmed_tokens)
    if record.warnings:
        out["x-gateway-warning"] = "; ".join(record.warnings)
    if record.proposed_action:
        out["x-gateway-proposed-action"] = record.proposed_action
    if record.reason:
        out["x-gateway-reason"] = record.reason
    if record.experiment:
        out["x-gateway-experiment"] = record.experiment
    if record.cost_headers is not None:
        out.update(record.cost_headers(record))
    if upstream is not None:
        for name, value in upstream.headers.items():
            if name.startswith(PASSED_UPSTREAM_HEADERS):
                out[name] = value
        upstream_id = upstream.headers.get("x-request-id")
        if upstream_id:
            out["x-upstream-request-id"] = upstream_id
    if record.headroom is not None:  # the caller's limits, not the gateway's account with the provider
        for name in [name for name in out if name.startswith(OPENAI_PREFIX)]:
            del out[name]
        out.update(record.headroom.openai_headers())
    return out


def cost_fields(record: RequestRecord, usage: Usage | None) -> Mapping[str, str]:
    """What the request cost once its stream's ``usage`` is known (kept as the record's), as fields to
    add to that usage for the client: the cost headers in snake case (``x_gateway_cost_usd``,
    ``x_gateway_saving_usd``, ``x_gateway_saving_basis``, ``x_gateway_cost_estimated``), priced as the
    ledger prices the request; none when it has no price."""
    if usage is None or record.cost_headers is None:
        return {}
    record.usage = usage
    return {name.replace("-", "_"): value for name, value in record.cost_headers(record).items()}


def complete(record: RequestRecord, exchange: Exchange) -> Response:
    """A non-streaming answer: the upstream's bytes, unchanged."""
    upstream = exchange.response
    record.upstream_seconds = time.perf_counter() - exchange.started
    data = exchange.data
    if data is None and upstream.headers.get("content-type", "").startswith("application/json"):
        data = json_object(upstream.content)
    if data is not None:
        read_completion(record, data)
    return answer(record, upstream, reported_content(record, data))


def reported_content(record: RequestRecord, data: dict[str, Any] | None) -> bytes | None:
    """The answer with its usage as the tenant asked it reported, when it must be rewritten."""
    if record.report_prompt_tokens is None or data is None:
        return None
    return rewrite_answer(data, record.report_prompt_tokens)


def answer(record: RequestRecord, upstream: httpx.Response, content: bytes | None = None) -> Response:
    """The upstream's whole answer, its bytes unchanged (``content``: rewritten), with the gateway's
    headers."""
    return Response(
        content=upstream.content if content is None else content,
        status_code=upstream.status_code,
        media_type=upstream.headers.get("content-type", "application/json"),
        headers=headers(record, upstream),
    )


def read_completion(record: RequestRecord, data: dict[str, Any]) -> None:
    record.usage = usage_from_openai(data.get("usage"))
    choices = data.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        record.finish_reason = choices[0].get("finish_reason")
        message = choices[0].get("message")
        if isinstance(message, dict) and isinstance(message.get("content"), str):
            record.output_text_chars = len(message["content"])
    summary = completion_logprobs(data)
    if summary is not None:
        summary.apply(record)


class StreamReading(Protocol):
    """What a stream reader (chat or Responses events) learnt by the end of a stream."""

    first_token_seconds: float | None
    finish_reason: str | None
    usage: dict[str, Any] | None

    @property
    def output_text(self) -> str: ...


async def close_stream(
    record: RequestRecord, exchange: Exchange, reader: StreamReading, *, finished: bool
) -> None:
    """However a relayed stream ended (its end, a broken upstream, a client that went away): close the
    upstream call, even while being cancelled, and keep what the reader learnt."""
    record.client_disconnected = not finished and record.error_type is None
    with anyio.CancelScope(shield=True):
        await exchange.response.aclose()
    record.upstream_seconds = time.perf_counter() - exchange.started
    record.first_token_seconds = reader.first_token_seconds
    record.finish_reason = reader.finish_reason
    record.output_text = reader.output_text
    record.output_text_chars = len(record.output_text)
    record.usage = usage_from_openai(reader.usage)


def relay(
    record: RequestRecord,
    exchange: Exchange,
    *,
    reader: ChatStreamReader,
    tally: LogprobTally | None,
    done: Callable[[], None],
) -> RelayResponse:
    """Relay the upstream's stream as it arrives. Whatever ends it (the end, a broken upstream, a client
    that went away) the upstream call is closed and ``done`` runs with what was learnt."""
    upstream = exchange.response
    if tally is not None:
        reader.on_chunk = tally.add_chunk
    reader.stamp = lambda usage: cost_fields(record, usage_from_openai(usage))

    async def body() -> AsyncIterator[bytes]:
        finished = False
        try:
            async for chunk in upstream.aiter_raw():
                out = reader.feed(chunk)
                if out:
                    yield out
            tail = reader.flush()
            if tail:
                yield tail
            finished = True
        except httpx.HTTPError:
            record.error_type = "upstream_stream_broken"
        finally:
            await close_stream(record, exchange, reader, finished=finished)
            summary = tally.summary() if tally is not None else None
            if summary is not None:
                summary.apply(record)
            done()

    return RelayResponse(
        body(),
        status_code=upstream.status_code,
        media_type=upstream.headers.get("content-type", "text/event-stream"),
        headers=headers(record, upstream),
    )
