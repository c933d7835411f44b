"""The Responses API in the cache: a response is kept when its status is ``completed`` (never
``incomplete``, ``failed`` or one still running in the background). A stream's ``response.completed``
event carries the whole response; a response is streamed back as ``response.created``, each output item
added and done (a message's text parts as one delta each), and ``response.completed``, numbered in
sequence."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from gateway.base.types import Usage
from gateway.money.usage import usage_from_openai
from gateway.responsecache.shape import named_event, unstamped


class ResponsesShape:
    api = "responses"
    key_headers: tuple[str, ...] = ("openai-beta",)

    def finished(self, data: Mapping[str, Any]) -> bool:
        return data.get("object") == "response" and data.get("status") == "completed"

    def usage(self, data: Mapping[str, Any]) -> Usage | None:
        return usage_from_openai(data.get("usage"))

    def headers(self, request_id: str) -> dict[str, str]:
        return {}

    def assemble(self, events: list[dict[str, Any]], usage: Usage | None) -> dict[str, Any] | None:
        for event in reversed(events):
            if event.get("type") == "response.completed" and isinstance(event.get("response"), dict):
                response = dict(event["response"])
                if isinstance(response.get("usage"), dict):
                    response["usage"] = unstamped(response["usage"])
                return response
        return None

    def stream(self, data: Mapping[str, Any], *, include_usage: bool) -> bytes:
        return b"".join(named_event(str(event["type"]), event) for event in _numbered(_events(data)))


def _numbered(events: Iterator[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for number, event in enumerate(events):
        yield {**event, "sequence_number": number}


def _events(data: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    running = {**data, "status": "in_progress", "output": [], "usage": None}
    yield {"type": "response.created", "response": running}
    yield {"type": "response.in_progress", "response": running}
    for index, item in enumerate(data.get("output") or ()):
        if not isinstance(item, dict):
            continue
        item_id = item.get("id")
        if item.get("type") == "message":
            yield {"type": "response.output_item.added", "output_index": index,
                   "item": {**item, "status": "in_progress", "content": []}}  # fmt: skip
            for part_index, part in enumerate(item.get("content") or ()):
                yield from _part_events(item_id, index, part_index, part)
        else:
            yield {"type": "response.output_item.added", "output_index": index, "item": item}
        yield {"type": "response.output_item.done", "output_index": index, "item": item}
    yield {"type": "response.completed", "response": dict(data)}


def _part_events(item_id: Any, index: int, part_index: int, part: Any) -> Iterator[dict[str, Any]]:
    where = {"item_id": item_id, "output_index": index, "content_index": part_index}
    text = part.get("text") if isinstance(part, dict) else None
    if not isinstance(text, str):
        yield {"type": "response.content_part.added", **where, "part": part}
        yield {"type": "response.content_part.done", **where, "part": part}
        return
    yield {"type": "response.content_part.added", **where, "part": {**part, "text": "", "annotations": []}}
    yield {"type": "response.output_text.delta", **where, "delta": text, "logprobs": []}
    yield {"type": "response.output_text.done", **where, "text": text, "logprobs": []}
    yield {"type": "response.content_part.done", **where, "part": part}
