"""What the cache needs to know of an API's answers (``Shape``), and the server-sent events it reads and
writes for all of them.

A shape says when an answer is complete enough to keep (``finished``: never an error, never one cut short
by a token limit), what it used, how the events of a stream the client got add up to the whole answer,
and how a whole answer is sent as the API's own stream, which the official SDKs parse."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

import orjson

from gateway.base.types import Usage
from gateway.upstream.sse import EventSplitter, events, json_of

STAMP_PREFIX = "x_gateway_"
"""The cost fields the gateway adds to a streamed usage (``gateway.core.replies.cost_fields``): the
request's, not the answer's, so never stored."""


class Shape(Protocol):
    api: str
    """chat, responses or messages: part of the key."""
    key_headers: tuple[str, ...]
    """The request headers forwarded upstream that can change the answer: part of the key."""

    def finished(self, data: Mapping[str, Any]) -> bool:
        """Whether the whole answer ``data`` ended as the model meant it to (kept only then)."""
        ...

    def usage(self, data: Mapping[str, Any]) -> Usage | None: ...

    def assemble(self, events: list[dict[str, Any]], usage: Usage | None) -> dict[str, Any] | None:
        """The whole answer the events of a stream make (``usage``: the request's, for a stream that
        did not give it to the client); None when they make none."""
        ...

    def stream(self, data: Mapping[str, Any], *, include_usage: bool) -> bytes:
        """The whole answer as the API's event stream (``include_usage``: chat's usage chunk)."""
        ...

    def headers(self, request_id: str) -> dict[str, str]:
        """Headers the API's clients read beside the gateway's own (Anthropic's ``request-id``)."""
        ...


def read_events(raw: bytes) -> list[dict[str, Any]]:
    """The JSON payloads of a stream's events, in order (``[DONE]`` and comments left out)."""
    splitter = EventSplitter()
    complete = splitter.feed(raw) + splitter.rest() + b"\n\n"
    return [data for event in events(complete) if (data := json_of(event)) is not None]


def data_event(data: Mapping[str, Any]) -> bytes:
    return b"data: " + orjson.dumps(data) + b"\n\n"


def named_event(name: str, data: Mapping[str, Any]) -> bytes:
    return b"event: " + name.encode() + b"\ndata: " + orjson.dumps(data) + b"\n\n"


def unstamped(usage: object) -> dict[str, Any] | None:
    """A streamed usage object without the gateway's cost fields."""
    if not isinstance(usage, dict):
        return None
    return {name: value for name, value in usage.items() if not name.startswith(STAMP_PREFIX)}
