"""Relaying a chat completion stream: SSE bytes pass through as they arrive, and are read on the side
for time to first token, finish reason and usage. The usage-only chunk that the gateway asked for on the
client's behalf is dropped when the client did not ask for it, and so is the ``"usage": null`` key that
asking puts in every other chunk: the client gets the chunks it would have got without the gateway.
A usage chunk the client gets can be stamped (``stamp``): its usage relayed with fields added, the only
chunk ever re-serialised."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping
from typing import Any

import orjson

from gateway.core.usage_report import rewrite_event
from gateway.upstream.sse import EventSplitter, data_of, events, swapped, with_data

_NULL_USAGE = re.compile(rb',\s*"usage"\s*:\s*null|"usage"\s*:\s*null\s*,?\s*')
"""The ``"usage": null`` key of a chunk, with its comma. An unescaped ``"`` cannot occur inside a JSON
string, so this only ever matches a key named usage whose value is null."""


class ChatStreamReader:
    """Feed upstream bytes in; get the bytes to send to the client out, whole events at a time."""

    def __init__(
        self,
        *,
        strip_usage_chunk: bool,
        started: float,
        report_prompt_tokens: int | None = None,
        collect_calls: bool = False,
    ) -> None:
        self.strip_usage_chunk = strip_usage_chunk
        self.report_prompt_tokens = report_prompt_tokens
        """Rewrite the usage chunk to show this many prompt tokens (``gateway.core.usage_report``)."""
        self.started = started
        self.first_token_seconds: float | None = None
        self.finish_reason: str | None = None
        self.usage: dict[str, Any] | None = None
        self.done = False
        self.output_parts: list[str] = []
        self.collect_calls = collect_calls
        """Also assemble the answer's text and tool calls apart (``text_parts``, ``calls``): for an
        experiment's comparison, so only on the requests it compares."""
        self.text_parts: list[str] = []
        self.calls: dict[int, tuple[str, str]] = {}
        """Tool calls by index: (name, arguments) as assembled from the deltas."""
        self.on_chunk: Callable[[dict[str, Any]], None] | None = None
        """Called with every parsed chunk (e.g. to tally logprobs)."""
        self.stamp: Callable[[dict[str, Any]], Mapping[str, str]] | None = None
        """Asked, with the usage of the chunk that brings it, for fields to add to that usage as the client
        gets it (none: the chunk goes as it came); not asked for a usage chunk that is dropped."""
        self._stamped: tuple[bytes, bytes] | None = None
        """The event just stamped (that very object) and what goes to the client instead."""
        self._splitter = EventSplitter()
        self._null_usage = False
        """The event just read has ``"usage": null``: a key only there because the gateway asked."""

    def feed(self, chunk: bytes) -> bytes:
        complete = self._splitter.feed(chunk)
        if not complete:
            return b""
        parts = events(complete)
        if not self.strip_usage_chunk and self.report_prompt_tokens is None:
            for event in parts:
                self._read(event)
            if self._stamped is None:
                return complete
            (original, replacement), self._stamped = self._stamped, None
            return swapped(parts, original, replacement)
        kept = [self._reported(event) for event in parts if self._read(event)]
        return b"".join(event + b"\n\n" for event in kept)

    def _reported(self, event: bytes) -> bytes:
        if self._stamped is not None and self._stamped[0] is event:
            event, self._stamped = self._stamped[1], None
        if self._null_usage:
            if not self.strip_usage_chunk:
                return event
            compact = event.replace(b',"usage":null', b"")  # OpenAI's own spelling: no regex needed
            return compact if len(compact) < len(event) else _NULL_USAGE.sub(b"", event)
        if self.report_prompt_tokens is None or b'"usage"' not in event:
            return event
        return rewrite_event(event, self.report_prompt_tokens)

    def flush(self) -> bytes:
        """What is left when the upstream closes: an unterminated last event, passed on unless dropped."""
        rest = self._splitter.rest()
        event = rest.strip()
        if not event:
            return rest
        if not self._read(event):
            return b""
        return self._reported(event if self._stamped is not None else rest)

    def _read(self, event: bytes) -> bool:
        """Learn what the event says; return False when it is the usage chunk to drop."""
        self._null_usage = False
        payload = data_of(event)
        if payload is None:
            return True
        if payload == b"[DONE]":
            self.done = True
            return True
        try:
            data = orjson.loads(payload)
        except orjson.JSONDecodeError:
            return True
        if not isinstance(data, dict):
            return True
        if self.on_chunk is not None:
            self.on_chunk(data)
        usage = data.get("usage")
        if not isinstance(usage, dict):
            self._null_usage = usage is None and "usage" in data
            usage = None
        elif usage:
            self.usage = usage
        choices = data.get("choices")
        if usage and self.stamp is not None and (choices or not self.strip_usage_chunk):
            self._stamp(event, data, usage)
        if choices:
            if isinstance(choices, list):
                self._read_choices(choices)
            return True
        return not (usage and self.strip_usage_chunk)

    def _stamp(self, event: bytes, data: dict[str, Any], usage: dict[str, Any]) -> None:
        assert self.stamp is not None
        fields = self.stamp(usage)
        if fields:
            self._stamped = (event, with_data(event, {**data, "usage": {**usage, **fields}}))

    def _read_choices(self, choices: list[Any]) -> None:
        """What the choices say; a field of an unexpected shape is ignored, never a reason to cut the
        stream (the bytes go on to the client as they are)."""
        for choice in choices:
            if not isinstance(choice, dict):
                continue
            delta = choice.get("delta")
            if not isinstance(delta, dict):
                delta = {}
            content = delta.get("content")
            calls = delta.get("tool_calls")
            if content or calls or delta.get("refusal") or delta.get("reasoning_content"):
                if self.first_token_seconds is None:
                    self.first_token_seconds = time.perf_counter() - self.started
                if isinstance(content, str):
                    self.output_parts.append(content)
                    if self.collect_calls:
                        self.text_parts.append(content)
                if self.collect_calls and isinstance(calls, list):
                    self._collect(calls)
                for call in calls if isinstance(calls, list) else ():
                    function = call.get("function") if isinstance(call, dict) else None
                    for key in ("name", "arguments"):
                        value = function.get(key) if isinstance(function, dict) else None
                        if isinstance(value, str):
                            self.output_parts.append(value)
            reason = choice.get("finish_reason")
            if reason and isinstance(reason, str):
                self.finish_reason = reason

    def _collect(self, calls: list[Any]) -> None:
        for call in calls:
            if not isinstance(call, dict):
                continue
            index = call.get("index")
            index = index if type(index) is int else len(self.calls)
            function = call.get("function")
            function = function if isinstance(function, dict) else {}
            name, arguments = self.calls.get(index, ("", ""))
            part_name, part_arguments = function.get("name"), function.get("arguments")
            name += part_name if isinstance(part_name, str) else ""
            arguments += part_arguments if isinstance(part_arguments, str) else ""
            self.calls[index] = (name, arguments)

    @property
    def output_text(self) -> str:
        return "".join(self.output_parts)

    @property
    def answer_text(self) -> str:
        """The answer's text alone (``collect_calls``), without the tool calls' names and arguments."""
        return "".join(self.text_parts)
