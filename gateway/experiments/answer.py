"""What a model answered, in one shape for every API: its text, the tools it called, why it stopped.

Read from a whole chat completion, a Responses object, or what a stream reader assembled; the shadow
comparison works on these and never on the bytes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from gateway.messages.stream import finish_reason_of as anthropic_finish_reason
from gateway.responses.stream import finish_reason_of


@dataclass(frozen=True, slots=True)
class ToolCall:
    name: str
    arguments: str
    """As the model wrote them: compared as JSON when they parse, as text otherwise."""


@dataclass(frozen=True, slots=True)
class Answer:
    text: str = ""
    calls: tuple[ToolCall, ...] = ()
    finish_reason: str | None = None


NO_ANSWER = Answer()


def answer_of(data: Mapping[str, Any] | None) -> Answer:
    """A chat completion (``choices``) or a Responses object (``output``); an empty answer otherwise."""
    if not isinstance(data, Mapping):
        return NO_ANSWER
    if isinstance(data.get("choices"), list):
        return chat_answer(data)
    if isinstance(data.get("output"), list):
        return responses_answer(data)
    if data.get("type") == "message" and isinstance(data.get("content"), list):
        return messages_answer(data["content"], data.get("stop_reason"))
    return NO_ANSWER


def messages_answer(blocks: Sequence[Any], stop_reason: object) -> Answer:
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
    return Answer(text="".join(texts), calls=tuple(calls), finish_reason=anthropic_finish_reason(stop_reason))


def chat_answer(data: Mapping[str, Any]) -> Answer:
    choices = data.get("choices")
    first = choices[0] if isinstance(choices, list) and choices else None
    if not isinstance(first, Mapping):
        return NO_ANSWER
    message = first.get("message")
    message = message if isinstance(message, Mapping) else {}
    content = message.get("content")
    calls = message.get("tool_calls")
    return Answer(
        text=content if isinstance(content, str) else "",
        calls=tuple(_chat_calls(calls if isinstance(calls, list) else ())),
        finish_reason=_text_or_none(first.get("finish_reason")),
    )


def _chat_calls(calls: Sequence[Any]) -> list[ToolCall]:
    found = []
    for call in calls:
        function = call.get("function") if isinstance(call, Mapping) else None
        if isinstance(function, Mapping) and isinstance(function.get("name"), str):
            arguments = function.get("arguments")
            found.append(ToolCall(function["name"], arguments if isinstance(arguments, str) else ""))
    return found


def responses_answer(data: Mapping[str, Any]) -> Answer:
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


def streamed_chat_answer(
    text: str, calls: Mapping[int, tuple[str, str]], finish_reason: str | None
) -> Answer:
    """What a chat stream assembled: its text, and its tool calls by index (name, arguments)."""
    return Answer(
        text=text,
        calls=tuple(ToolCall(name, arguments) for _, (name, arguments) in sorted(calls.items())),
        finish_reason=finish_reason,
    )


def _text_or_none(value: object) -> str | None:
    return value if isinstance(value, str) else None
