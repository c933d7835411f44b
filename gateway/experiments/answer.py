"""What a model answered, in one shape for every API: its text, the tools it called, why it stopped.

Read from a whole chat completion or what a chat stream assembled; the Responses and Messages fronts read
theirs the same way (``gateway.fronts.responses.stream``, ``gateway.fronts.messages.stream``). The shadow
comparison works on these and never on the bytes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


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
    """A chat completion (``choices``); an empty answer otherwise."""
    if not isinstance(data, Mapping) or not isinstance(data.get("choices"), list):
        return NO_ANSWER
    return chat_answer(data)


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
