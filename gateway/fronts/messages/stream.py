"""Reading an Anthropic Messages event stream on the side while its events pass through, whole and
unchanged but for a ``message_delta``'s usage when it is stamped (``stamp``).

Events are ``event: <type>`` / ``data: <json>`` blocks: ``message_start`` (the message's id and its usage so
far: input, cache reads and writes), then per content block ``content_block_start``, its
``content_block_delta``s and ``content_block_stop``, ``ping``s anywhere, ``message_delta`` (the stop reason
and the usage), ``message_stop``; or an ``error`` event, which can come after the 200.

The usage of a ``message_delta`` is **cumulative**: each carries the totals so far, so the last value of
each field wins and values are never added (adding them double-counts cache reads and output). Fields a
``message_delta`` leaves out (or sends as null) keep their ``message_start`` value. Time to first token is
taken at the first ``content_block_delta`` (text, tool input, thinking). The ``server_tool_use`` blocks
opened are counted by tool (``block_uses``): what a stream cut before its totals is billed for them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import orjson

from gateway.experiments.answer import NO_ANSWER, Answer, ToolCall
from gateway.servertools.kinds import NO_USES, ToolUses, tool_uses
from gateway.servertools.reported import block_uses
from gateway.upstream.sse import StampedRelay, json_of, with_data

STOP_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "refusal": "content_filter",
}
"""Anthropic's stop reasons in chat's words (the sampler compares finish reasons across fronts); any other
(``pause_turn``) is kept as it is."""

OUTPUT_DELTAS = {"text_delta": "text", "input_json_delta": "partial_json", "thinking_delta": "thinking"}
"""The deltas that are output the model produced, and the field that holds it."""


def finish_reason_of(stop_reason: object) -> str | None:
    if not isinstance(stop_reason, str):
        return None
    return STOP_REASONS.get(stop_reason, stop_reason)


def answer_of(data: object) -> Answer:
    """What a whole Anthropic message answered, for a shadow experiment's comparison; an empty answer for
    anything else."""
    if not isinstance(data, Mapping) or data.get("type") != "message":
        return NO_ANSWER
    content = data.get("content")
    if not isinstance(content, list):
        return NO_ANSWER
    return blocks_answer(content, data.get("stop_reason"))


def blocks_answer(blocks: Sequence[Any], stop_reason: object) -> Answer:
    """An Anthropic message's content blocks: its text blocks' text, its ``tool_use`` blocks as calls
    (their ``input`` as JSON; from a stream, the ``partial_json`` they were sent as)."""
    texts: list[str] = []
    calls: list[ToolCall] = []
    for block in blocks:
        if not isinstance(block, Mapping):
            continue
        if block.get("type") == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif block.get("type") == "tool_use" and isinstance(block.get("name"), str):
            streamed = block.get("partial_json")
            arguments = (
                streamed if isinstance(streamed, str) else orjson.dumps(block.get("input", {})).decode()
            )
            calls.append(ToolCall(block["name"], arguments))
    return Answer(text="".join(texts), calls=tuple(calls), finish_reason=finish_reason_of(stop_reason))


def merged_usage(usage: dict[str, Any] | None, update: object) -> dict[str, Any] | None:
    """``usage`` with the fields ``update`` carries replaced by their new values (cumulative totals)."""
    if not isinstance(update, dict):
        return usage
    changed = {key: value for key, value in update.items() if value is not None}
    return {**(usage or {}), **changed}


class MessagesStreamReader(StampedRelay):
    """Feed upstream bytes in, get the whole events among them out; read what the events say."""

    def __init__(self, *, started: float, collect: bool = False) -> None:
        super().__init__()
        self.started = started
        self.collect = collect
        """Also assemble the content blocks (``blocks``): for an experiment's comparison, so only on the
        requests it compares."""
        self.blocks: dict[int, dict[str, Any]] = {}
        """By index: the block as ``content_block_start`` opened it, its text and tool input grown by the
        deltas (``text``, ``partial_json``)."""
        self.first_token_seconds: float | None = None
        self.finish_reason: str | None = None
        self.stop_reason: str | None = None
        self.usage: dict[str, Any] | None = None
        """Anthropic's usage object: ``message_start``'s, updated by every ``message_delta``."""
        self.message_id: str | None = None
        self.error: dict[str, Any] | None = None
        """The ``error`` event's error object, when the stream ended in one."""
        self.final = False
        """``message_stop`` has been read."""
        self.totals = False
        """A ``message_delta`` brought the usage's totals (before it, output is ``message_start``'s 1)."""
        self.block_uses: ToolUses = NO_USES
        """The billed server-side tool uses among the blocks opened so far."""
        self.stamp: Callable[[dict[str, Any]], Mapping[str, str]] | None = None
        """Asked, at a ``message_delta`` with usage, with the usage's totals so far, for fields to add to
        that event's usage as the client gets it (none: the event goes as it came)."""

    def _read(self, event: bytes) -> None:
        data = json_of(event)
        if data is None:
            return
        kind = data.get("type")
        if kind == "content_block_delta":
            self._delta(data.get("delta"))
            if self.collect:
                self._grow(data)
        elif kind == "content_block_start":
            self._open(data.get("content_block"), data.get("index"))
        elif kind == "message_start":
            message = data.get("message")
            if isinstance(message, dict):
                if isinstance(message.get("id"), str):
                    self.message_id = message["id"]
                self.usage = merged_usage(None, message.get("usage"))
        elif kind == "message_delta":
            delta = data.get("delta")
            if isinstance(delta, dict) and isinstance(delta.get("stop_reason"), str):
                self.stop_reason = delta["stop_reason"]
                self.finish_reason = finish_reason_of(self.stop_reason)
            if isinstance(data.get("usage"), dict):
                self.totals = True
                self.usage = merged_usage(self.usage, data["usage"])
                fields = self.stamp(self.usage or {}) if self.stamp is not None else None
                if fields:
                    stamped = {**data, "usage": {**data["usage"], **fields}}
                    self._stamped = (event, with_data(event, stamped))
        elif kind == "message_stop":
            self.final = True
        elif kind == "error":
            error = data.get("error")
            self.error = error if isinstance(error, dict) else {"type": "api_error"}

    def _open(self, block: object, index: object) -> None:
        if not isinstance(block, dict):
            return
        if block.get("type") == "server_tool_use":
            self.block_uses = tool_uses((*self.block_uses, *block_uses([block])))
        if self.collect and type(index) is int:
            self.blocks[index] = dict(block)

    def _grow(self, data: dict[str, Any]) -> None:
        block, delta = self.blocks.get(data.get("index")), data.get("delta")  # type: ignore[arg-type]
        if block is None or not isinstance(delta, dict):
            return
        for field in ("text", "partial_json"):
            if isinstance(delta.get(field), str):
                block[field] = str(block.get(field) or "") + delta[field]

    def _delta(self, delta: object) -> None:
        if self.first_token_seconds is None:
            self.first_token_seconds = time.perf_counter() - self.started
        if not isinstance(delta, dict):
            return
        field = OUTPUT_DELTAS.get(str(delta.get("type")))
        value = delta.get(field) if field is not None else None
        if isinstance(value, str):
            self.output_parts.append(value)
