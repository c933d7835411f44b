"""Reading a Responses event stream on the side while its events pass through, whole and unchanged but
for the final event's usage when it is stamped (``stamp``).

Events are ``event: <type>`` / ``data: <json>`` blocks; there is no ``[DONE]``. The response's id comes
with ``response.created``; time to first token is taken at the first output delta (text, refusal,
function call arguments, reasoning: any ``response.*.delta``); usage, status and the reason a response
stopped come with the final event, ``response.completed``, ``response.incomplete`` or
``response.failed``. Server-side tool calls billed per use are counted from the output items as they end
(``response.output_item.done``) and from the final event's response, whichever says more.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from gateway.experiments.answer import NO_ANSWER, Answer, ToolCall
from gateway.servertools.kinds import ToolUses
from gateway.servertools.reported import BILLED_ITEMS, item_uses, most, response_uses
from gateway.upstream.sse import StampedRelay, json_of, with_data

FINAL_EVENTS = frozenset({"response.completed", "response.incomplete", "response.failed"})
TEXT_DELTAS = frozenset(
    {"response.output_text.delta", "response.function_call_arguments.delta", "response.refusal.delta"}
)


def finish_reason_of(response: Mapping[str, Any]) -> str | None:
    """A response's end, in chat's words: stop, tool_calls, length, content_filter, or its status."""
    status = response.get("status")
    if status == "completed":
        output = response.get("output")
        calls = any(
            isinstance(item, Mapping) and str(item.get("type", "")).endswith("_call")
            for item in (output if isinstance(output, list) else ())
        )
        return "tool_calls" if calls else "stop"
    if status == "incomplete":
        details = response.get("incomplete_details")
        reason = details.get("reason") if isinstance(details, Mapping) else None
        return "length" if reason == "max_output_tokens" else str(reason or "incomplete")
    return str(status) if isinstance(status, str) else None


def answer_of(data: object) -> Answer:
    """What a Responses object (``output``) answered, for a shadow experiment's comparison; an empty
    answer for anything else."""
    if not isinstance(data, Mapping) or not isinstance(data.get("output"), list):
        return NO_ANSWER
    texts: list[str] = []
    calls: list[ToolCall] = []
    for item in data.get("output") or ():
        if not isinstance(item, Mapping):
            continue
        kind = item.get("type")
        if kind == "message":
            for part in item.get("content") or ():
                if isinstance(part, Mapping) and isinstance(part.get("text"), str):
                    texts.append(part["text"])
        elif kind == "function_call" and isinstance(item.get("name"), str):
            arguments = item.get("arguments")
            calls.append(ToolCall(item["name"], arguments if isinstance(arguments, str) else ""))
    return Answer(text="".join(texts), calls=tuple(calls), finish_reason=finish_reason_of(data))


class ResponsesStreamReader(StampedRelay):
    """Feed upstream bytes in, get the whole events among them out; read what the events say."""

    def __init__(self, *, started: float) -> None:
        super().__init__()
        self.started = started
        self.first_token_seconds: float | None = None
        self.finish_reason: str | None = None
        self.usage: dict[str, Any] | None = None
        self.response_id: str | None = None
        self.final = False
        """The final event has been read."""
        self.response: dict[str, Any] | None = None
        """The response object of the last event that carried one (the final event's at the end)."""
        self._tool_items: list[dict[str, Any]] = []
        self.stamp: Callable[[dict[str, Any]], Mapping[str, str]] | None = None
        """Asked, with the final event's usage, for fields to add to that usage as the client gets it
        (none: the event goes as it came)."""

    @property
    def tool_uses(self) -> ToolUses:
        """The billed server-side tool uses seen: in the items that ended, and in the last response."""
        return most(item_uses(self._tool_items), response_uses(self.response))

    def _read(self, event: bytes) -> None:
        data = json_of(event)
        if data is None:
            return
        kind = data.get("type")
        if not isinstance(kind, str):
            return
        if kind.endswith(".delta"):
            if self.first_token_seconds is None:
                self.first_token_seconds = time.perf_counter() - self.started
            if kind in TEXT_DELTAS and isinstance(data.get("delta"), str):
                self.output_parts.append(data["delta"])
            return
        if kind == "response.output_item.done":
            item = data.get("item")
            if isinstance(item, dict) and item.get("type") in BILLED_ITEMS:
                self._tool_items.append(item)
            return
        response = data.get("response")
        if not isinstance(response, dict):
            return
        self.response = response
        if isinstance(response.get("id"), str):
            self.response_id = response["id"]
        if kind in FINAL_EVENTS:
            self.final = True
            self.finish_reason = finish_reason_of(response)
            usage = response.get("usage")
            if isinstance(usage, dict):
                self.usage = usage
                fields = self.stamp(usage) if self.stamp is not None else None
                if fields:
                    stamped = {**data, "response": {**response, "usage": {**usage, **fields}}}
                    self._stamped = (event, with_data(event, stamped))
