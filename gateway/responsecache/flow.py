"""The response cache's steps in a front's flow: look the request up once it is checked (before it is
counted, decided, held or sent), answer a hit in the API's own shape, and keep a miss's answer.

``x-gateway-cache`` says what happened: ``hit`` (answered from the cache), ``miss`` (sent upstream; its
answer is kept when complete), ``bypass`` (the tenant has a cache but this request may not use it:
``cache-control: no-store``, a non-deterministic request under ``deterministic_only``, a background
response). Absent: the tenant has no cache. ``cache-control: no-cache`` skips the lookup and keeps the
fresh answer (``miss``).

A hit is the request's cost event with action and basis ``cache_hit``: no tokens, cost 0, and as its
counterfactual the price of the usage the stored answer had (``gateway.core.metering``).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterable, AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any

import orjson
import redis.asyncio as aioredis
from starlette.responses import Response, StreamingResponse

from gateway.base.background import Background
from gateway.base.record import CACHE_HIT, Observer, RequestRecord, notify_soon
from gateway.config.runtime import Runtime
from gateway.config.schema.response_cache import ResponseCacheConfig
from gateway.core import replies
from gateway.responsecache.entry import Entry
from gateway.responsecache.key import NO_CACHE, NO_STORE, cache_key, deterministic, directive, variant_of
from gateway.responsecache.shape import Shape, read_events
from gateway.responsecache.store import ResponseCacheStore

HEADER = "x-gateway-cache"
SOURCE_HEADER = "x-gateway-cache-source"
STREAM_BUFFER_RATIO = 8
"""A stream's events are kept up to this many times ``max_entry_bytes`` while they pass (events repeat
their ids and wrappers); past that, the answer would be too large to keep anyway."""


@dataclass(frozen=True, slots=True)
class Lookup:
    """A request of a tenant with a cache: its key (None: bypass) and the stored answer, if any."""

    config: ResponseCacheConfig
    shape: Shape
    key: str | None = None
    entry: Entry | None = None


class ResponseCache:
    def __init__(self, redis: aioredis.Redis, *, prefix: str, background: Background) -> None:
        self.store = ResponseCacheStore(redis)
        self._prefix = prefix
        self._background = background

    async def look(
        self,
        runtime: Runtime,
        record: RequestRecord,
        shape: Shape,
        body: Mapping[str, Any],
        headers: Mapping[str, str],
        *,
        query: str = "",
    ) -> Lookup | None:
        """The request's lookup (``query``: the query string forwarded with it); None when its tenant has
        no cache (callers look the tenant up in ``runtime.response_caches`` first, so a request of a tenant
        without one never gets here)."""
        assert record.tenant is not None and record.requested_model is not None
        config = runtime.response_caches.get(record.tenant.name)
        if config is None:
            return None
        control = directive(headers.get("cache-control"))
        if (
            control == NO_STORE
            or body.get("background") is True
            or (config.deterministic_only and not deterministic(body))
        ):
            return Lookup(config, shape)
        variant = variant_of(headers, shape.key_headers, query)
        key = cache_key(self._prefix, record.tenant.name, shape.api, record.requested_model, body, variant)
        entry = None if control == NO_CACHE else await self.store.get(key)
        return Lookup(config, shape, key, entry)

    def answer(
        self,
        record: RequestRecord,
        lookup: Lookup,
        observers: tuple[Observer, ...],
        *,
        include_usage: bool = False,
    ) -> Response:
        """A hit, answered in the API's shape (a stream when the request asked for one); its cost event
        is recorded once it is handed over."""
        entry = lookup.entry
        assert entry is not None
        record.action = CACHE_HIT
        record.called_model = entry.model
        record.provider = entry.provider
        record.usage = entry.usage
        record.status = 200
        headers = {
            **replies.headers(record),
            **lookup.shape.headers(record.request_id),
            HEADER: "hit",
            SOURCE_HEADER: entry.source,
            "age": str(max(0, int(time.time() * 1000) - entry.stored_ms) // 1000),
        }
        if record.stream:
            content = lookup.shape.stream(orjson.loads(entry.body), include_usage=include_usage)
            response = Response(content, media_type="text/event-stream", headers=headers)
        else:
            response = Response(entry.body, media_type="application/json", headers=headers)
        notify_soon(observers, record)
        return response

    def keep(self, record: RequestRecord, lookup: Lookup, response: Response) -> Response:
        """A miss's answer, with its header; kept (in the background, once it is whole) when it is a 200
        that ended as the model meant it to."""
        if lookup.key is None:
            response.headers[HEADER] = "bypass"
            return response
        response.headers[HEADER] = "miss"
        if response.status_code != 200:
            return response
        if isinstance(response, StreamingResponse):
            response.body_iterator = self._teed(record, lookup, response.body_iterator)
        else:
            self._spawn(record, lookup, bytes(response.body), streamed=False)
        return response

    async def _teed(
        self, record: RequestRecord, lookup: Lookup, events: AsyncIterable[Any]
    ) -> AsyncIterator[Any]:
        """The stream as it goes, copied aside; handed on to be kept only when it ran to its end (a
        client that went away stops the iteration here, and nothing is kept)."""
        limit = lookup.config.max_entry_bytes * STREAM_BUFFER_RATIO
        parts: list[bytes] | None = []
        size = 0
        async for chunk in events:
            if parts is not None:
                size += len(chunk)
                parts = parts if size <= limit else None
                if parts is not None:
                    parts.append(chunk.encode() if isinstance(chunk, str) else bytes(chunk))
            yield chunk
        if parts is not None:
            self._spawn(record, lookup, b"".join(parts), streamed=True)

    def _spawn(self, record: RequestRecord, lookup: Lookup, raw: bytes, *, streamed: bool) -> None:
        if record.error_type is not None or record.client_disconnected or record.called_model is None:
            return
        self._background.spawn(self._keep(record, lookup, raw, streamed=streamed), name="response_cache")

    async def _keep(self, record: RequestRecord, lookup: Lookup, raw: bytes, *, streamed: bool) -> None:
        entry = entry_of(record, lookup.shape, raw, streamed=streamed)
        if entry is not None and lookup.key is not None:
            await self.store.put(lookup.key, entry, lookup.config)


def entry_of(record: RequestRecord, shape: Shape, raw: bytes, *, streamed: bool) -> Entry | None:
    """What to keep of an answer (the client's bytes: a whole body, or a stream's events); None when it
    is not complete, or its usage is not known exactly."""
    if streamed:
        data = shape.assemble(read_events(raw), record.usage)
    else:
        try:
            loaded = orjson.loads(raw)
        except orjson.JSONDecodeError:
            return None
        data = loaded if isinstance(loaded, dict) else None
    if data is None or not shape.finished(data):
        return None
    usage = shape.usage(data) or record.usage
    if usage is None or usage.estimated or record.called_model is None:
        return None
    return Entry(
        model=record.called_model,
        provider=record.provider or "",
        usage=usage,
        source=record.request_id,
        stored_ms=int(time.time() * 1000),
        body=raw if not streamed else orjson.dumps(data),
    )
