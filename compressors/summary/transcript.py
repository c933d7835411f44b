"""How old messages read in the cheap model's prompt: numbered, with roles, tool calls and "[image]"."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from compressors.protocols import Message
from compressors.summary.selection import Block

PART_PLACEHOLDERS = {
    "image_url": "[image]",
    "input_image": "[image]",
    "input_audio": "[audio]",
    "file": "[file]",
}


def render_block(messages: Sequence[Message], block: Block) -> str:
    return "\n\n".join(render_message(messages[i], number=i + 1) for i in block.indices)


def render_message(message: Message, *, number: int) -> str:
    """One message as ``[number] role (name): text``, followed by its tool calls, if any."""
    role = str(message.get("role", "unknown"))
    label = f"[{number}] {role}"
    if message.get("name"):
        label += f" ({message['name']})"
    if message.get("tool_call_id"):
        label += f" (result of call {message['tool_call_id']})"
    lines = [f"{label}: {content_text(message.get('content'))}".rstrip()]
    if message.get("refusal"):
        lines.append(f"(refused: {message['refusal']})")
    for call in message.get("tool_calls") or ():
        lines.append(_call_line(call))
    if message.get("function_call"):
        lines.append(_call_line({"function": message["function_call"]}))
    return "\n".join(lines)


def content_text(content: Any) -> str:
    """The text of a message's content; non-text parts become placeholders such as "[image]"."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(_part_text(part) for part in content)
    return orjson.dumps(content).decode()


def _part_text(part: Any) -> str:
    if isinstance(part, str):
        return part
    if not isinstance(part, dict):
        return orjson.dumps(part).decode()
    kind = str(part.get("type", ""))
    if kind in ("text", "input_text", "output_text"):
        return str(part.get("text", ""))
    if kind == "refusal":
        return f"(refused: {part.get('refusal', '')})"
    return PART_PLACEHOLDERS.get(kind, f"[{kind or 'part'}]")


def call_arguments(message: Message) -> list[str]:
    """The arguments of the tool calls of an assistant ``message``, as text, in order."""
    calls = [*(message.get("tool_calls") or ()), {"function": message.get("function_call")}]
    return [_arguments(call["function"]) for call in calls if _is_call(call)]


def _is_call(call: Any) -> bool:
    return isinstance(call, dict) and isinstance(call.get("function"), dict)


def _arguments(function: dict[str, Any]) -> str:
    arguments = function.get("arguments", "")
    return arguments if isinstance(arguments, str) else orjson.dumps(arguments).decode()


def _call_line(call: Any) -> str:
    if not _is_call(call):
        return f"-> tool call: {orjson.dumps(call).decode()}"
    function = call["function"]
    arguments = _arguments(function)
    prefix = f"-> tool call {call['id']}: " if call.get("id") else "-> tool call: "
    return f"{prefix}{function.get('name', '?')}({arguments})"
