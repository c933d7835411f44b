"""Anthropic Messages in the cache: a message is kept when it stopped at its end (``end_turn``), a stop
sequence or a tool use; never at ``max_tokens``, a ``pause_turn`` (a server tool's loop left unfinished),
a ``refusal`` or the context window. A stream's events add up to the message (text, tool input, thinking
and its signature per block; the ``message_delta``'s stop reason and cumulative usage), and a message is
streamed back as ``message_start``, each block's start, one delta and stop, ``message_delta`` and
``message_stop``, as the SDKs' stream accumulators expect."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from gateway.base.types import Usage
from gateway.money.anthropic_usage import usage_from_anthropic
from gateway.responsecache.shape import named_event, unstamped

FINISHED = frozenset({"end_turn", "stop_sequence", "tool_use"})

_DELTAS = {"text_delta": "text", "thinking_delta": "thinking", "input_json_delta": "partial_json"}


class MessagesShape:
    api = "messages"
    key_headers: tuple[str, ...] = ("anthropic-version", "anthropic-beta")

    def finished(self, data: Mapping[str, Any]) -> bool:
        return data.get("type") == "message" and data.get("stop_reason") in FINISHED

    def usage(self, data: Mapping[str, Any]) -> Usage | None:
        usage = data.get("usage")
        return usage_from_anthropic(usage) if isinstance(usage, dict) else None

    def headers(self, request_id: str) -> dict[str, str]:
        return {"request-id": request_id}

    def assemble(self, events: list[dict[str, Any]], usage: Usage | None) -> dict[str, Any] | None:
        message: dict[str, Any] | None = None
        blocks: dict[int, dict[str, Any]] = {}
        stopped = False
        for event in events:
            kind = event.get("type")
            index = event.get("index")
            if kind == "message_start" and isinstance(event.get("message"), dict):
                message = dict(event["message"])
                message["usage"] = unstamped(message.get("usage")) or {}
            elif kind == "content_block_start" and type(index) is int:
                block = event.get("content_block")
                blocks[index] = dict(block) if isinstance(block, dict) else {}
            elif kind == "content_block_delta" and index in blocks:
                _grow(blocks[index], event.get("delta"))
            elif kind == "content_block_stop" and index in blocks:
                _close(blocks[index])
            elif kind == "message_delta" and message is not None:
                delta = event.get("delta")
                for name in ("stop_reason", "stop_sequence"):
                    if isinstance(delta, dict) and name in delta:
                        message[name] = delta[name]
                changed = unstamped(event.get("usage")) or {}
                message["usage"] = {
                    **message["usage"],
                    **{name: value for name, value in changed.items() if value is not None},
                }
            elif kind == "message_stop":
                stopped = True
        if message is None or not stopped:
            return None
        message["content"] = [blocks[index] for index in sorted(blocks)]
        return message

    def stream(self, data: Mapping[str, Any], *, include_usage: bool) -> bytes:
        usage: dict[str, Any] = data["usage"] if isinstance(data.get("usage"), dict) else {}
        opening = {
            **data,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {**usage, "output_tokens": 0},
        }
        out = [named_event("message_start", {"type": "message_start", "message": opening})]
        for index, block in enumerate(data.get("content") or ()):
            out.extend(_block_events(index, block))
        out.append(
            named_event(
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {
                        "stop_reason": data.get("stop_reason"),
                        "stop_sequence": data.get("stop_sequence"),
                    },
                    "usage": usage,
                },
            )
        )
        out.append(named_event("message_stop", {"type": "message_stop"}))
        return b"".join(out)


def _grow(block: dict[str, Any], delta: object) -> None:
    if not isinstance(delta, dict):
        return
    kind = delta.get("type")
    field = _DELTAS.get(str(kind))
    if field is not None and isinstance(delta.get(field), str):
        block[field] = str(block.get(field) or "") + delta[field]
    elif kind == "signature_delta" and isinstance(delta.get("signature"), str):
        block["signature"] = delta["signature"]
    elif kind == "citations_delta" and isinstance(delta.get("citation"), dict):
        block["citations"] = [*(block.get("citations") or ()), delta["citation"]]


def _close(block: dict[str, Any]) -> None:
    """A tool use's input, whole once its block stops: the JSON its deltas sent."""
    sent = block.pop("partial_json", None)
    if isinstance(sent, str) and sent:
        try:
            block["input"] = orjson.loads(sent)
        except orjson.JSONDecodeError:
            block["input"] = {}


def _block_events(index: int, block: Any) -> list[bytes]:
    kind = block.get("type") if isinstance(block, dict) else None
    opened: dict[str, Any]
    delta: dict[str, Any] | None = None
    extra: list[dict[str, Any]] = []
    if kind == "text":
        opened = {**block, "text": ""}
        delta = {"type": "text_delta", "text": block.get("text", "")}
    elif kind == "tool_use":
        opened = {**block, "input": {}}
        delta = {"type": "input_json_delta", "partial_json": orjson.dumps(block.get("input", {})).decode()}
    elif kind == "thinking":
        opened = {**block, "thinking": "", "signature": ""}
        delta = {"type": "thinking_delta", "thinking": block.get("thinking", "")}
        if block.get("signature"):
            extra.append({"type": "signature_delta", "signature": block["signature"]})
    else:  # redacted thinking, server tool uses and their results: whole at their start
        opened = dict(block) if isinstance(block, dict) else {}
    out = [
        named_event(
            "content_block_start", {"type": "content_block_start", "index": index, "content_block": opened}
        )
    ]
    for each in ([delta] if delta is not None else []) + extra:
        out.append(
            named_event("content_block_delta", {"type": "content_block_delta", "index": index, "delta": each})
        )
    out.append(named_event("content_block_stop", {"type": "content_block_stop", "index": index}))
    return out
