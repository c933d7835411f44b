"""Chat completions in the cache: a completion is kept when every choice stopped (``stop``) or called
tools (``tool_calls``), never when cut by ``length`` or ``content_filter``; a stream's chunks add up to the
completion (content, refusal, tool calls by index, logprobs), and a completion is streamed back as one
chunk opening each choice, one with its content, one with its tool calls, one with its finish reason, the
usage chunk when asked for, and ``[DONE]``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gateway.base.types import Usage
from gateway.money.usage import usage_from_openai
from gateway.responsecache.shape import data_event, unstamped

FINISHED = frozenset({"stop", "tool_calls", "function_call"})


class ChatShape:
    api = "chat"
    key_headers: tuple[str, ...] = ("openai-beta",)

    def finished(self, data: Mapping[str, Any]) -> bool:
        choices = data.get("choices")
        if data.get("object") != "chat.completion" or not isinstance(choices, list) or not choices:
            return False
        return all(isinstance(choice, dict) and choice.get("finish_reason") in FINISHED for choice in choices)

    def usage(self, data: Mapping[str, Any]) -> Usage | None:
        return usage_from_openai(data.get("usage"))

    def headers(self, request_id: str) -> dict[str, str]:
        return {}

    def assemble(self, events: list[dict[str, Any]], usage: Usage | None) -> dict[str, Any] | None:
        chunks = [event for event in events if event.get("object") == "chat.completion.chunk"]
        if not chunks:
            return None
        first = chunks[0]
        choices: dict[int, _Choice] = {}
        reported: dict[str, Any] | None = None
        for chunk in chunks:
            if isinstance(chunk.get("usage"), dict):
                reported = unstamped(chunk["usage"])
            for choice in chunk.get("choices") or ():
                if isinstance(choice, dict) and type(choice.get("index")) is int:
                    choices.setdefault(choice["index"], _Choice()).add(choice)
        answer: dict[str, Any] = {
            "id": first.get("id"),
            "object": "chat.completion",
            "created": first.get("created"),
            "model": first.get("model"),
            "choices": [choices[index].whole(index) for index in sorted(choices)],
        }
        for name in ("system_fingerprint", "service_tier"):
            if first.get(name) is not None:
                answer[name] = first[name]
        if reported is None and usage is not None:
            reported = openai_usage(usage)
        if reported is not None:
            answer["usage"] = reported
        return answer

    def stream(self, data: Mapping[str, Any], *, include_usage: bool) -> bytes:
        base = {
            "id": data.get("id"),
            "object": "chat.completion.chunk",
            "created": data.get("created"),
            "model": data.get("model"),
        }
        for name in ("system_fingerprint", "service_tier"):
            if data.get(name) is not None:
                base[name] = data[name]
        out: list[bytes] = []

        def chunk(index: int, delta: dict[str, Any], **fields: Any) -> None:
            choice = {"index": index, "delta": delta, "logprobs": None, "finish_reason": None, **fields}
            out.append(data_event({**base, "choices": [choice]}))

        for choice in data.get("choices") or ():
            index = choice.get("index", 0)
            message = choice.get("message") or {}
            chunk(index, {"role": message.get("role", "assistant"), "content": ""})
            if message.get("content"):
                chunk(index, {"content": message["content"]}, logprobs=choice.get("logprobs"))
            if message.get("refusal"):
                chunk(index, {"refusal": message["refusal"]})
            calls = message.get("tool_calls")
            if calls:
                chunk(index, {"tool_calls": [{"index": n, **call} for n, call in enumerate(calls)]})
            chunk(index, {}, finish_reason=choice.get("finish_reason"))
        if include_usage and data.get("usage") is not None:
            out.append(data_event({**base, "choices": [], "usage": data["usage"]}))
        out.append(b"data: [DONE]\n\n")
        return b"".join(out)


class _Choice:
    """One choice as its deltas add up."""

    def __init__(self) -> None:
        self.role = "assistant"
        self.content: list[str] = []
        self.refusal: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}
        self.logprobs: list[Any] | None = None
        self.finish_reason: str | None = None

    def add(self, choice: dict[str, Any]) -> None:
        delta = choice.get("delta")
        delta = delta if isinstance(delta, dict) else {}
        if isinstance(delta.get("role"), str):
            self.role = delta["role"]
        if isinstance(delta.get("content"), str):
            self.content.append(delta["content"])
        if isinstance(delta.get("refusal"), str):
            self.refusal.append(delta["refusal"])
        for call in delta.get("tool_calls") or ():
            if isinstance(call, dict):
                self._call(call)
        logprobs = choice.get("logprobs")
        if isinstance(logprobs, dict) and isinstance(logprobs.get("content"), list):
            self.logprobs = [*(self.logprobs or ()), *logprobs["content"]]
        if isinstance(choice.get("finish_reason"), str):
            self.finish_reason = choice["finish_reason"]

    def _call(self, call: dict[str, Any]) -> None:
        given = call.get("index")
        index = given if type(given) is int else len(self.calls)
        whole = self.calls.setdefault(
            index, {"id": None, "type": "function", "function": {"name": "", "arguments": ""}}
        )
        if isinstance(call.get("id"), str):
            whole["id"] = call["id"]
        if isinstance(call.get("type"), str):
            whole["type"] = call["type"]
        function = call.get("function")
        for name in ("name", "arguments"):
            part = function.get(name) if isinstance(function, dict) else None
            if isinstance(part, str):
                whole["function"][name] += part

    def whole(self, index: int) -> dict[str, Any]:
        message: dict[str, Any] = {
            "role": self.role,
            "content": "".join(self.content) if self.content or not self.calls else None,
            "refusal": "".join(self.refusal) if self.refusal else None,
        }
        if self.calls:
            message["tool_calls"] = [self.calls[n] for n in sorted(self.calls)]
        return {
            "index": index,
            "message": message,
            "logprobs": None if self.logprobs is None else {"content": self.logprobs},
            "finish_reason": self.finish_reason,
        }


def openai_usage(usage: Usage) -> dict[str, Any]:
    """A chat completion's ``usage`` object for the gateway's ``Usage``."""
    return {
        "prompt_tokens": usage.input_tokens,
        "completion_tokens": usage.output_tokens,
        "total_tokens": usage.input_tokens + usage.output_tokens,
        "prompt_tokens_details": {"cached_tokens": usage.cached_input_tokens},
        "completion_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
    }
