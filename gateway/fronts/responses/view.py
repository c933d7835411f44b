"""The adapter between Responses input items and the chat-style messages counting and the compressors
work on.

To the view (``to_view``): ``instructions`` become a system message; a message item keeps its role and
its content parts (``input_text`` / ``output_text`` as text parts, ``input_image`` as an image part);
consecutive calls become one assistant message with ``tool_calls``; an output becomes a ``tool``
message; a reasoning item is folded into the message of the item after it (its summary as read-only
text); any other item becomes a ``system`` message holding its JSON without ids and encrypted blobs, so
that the compressors keep it verbatim. Each message says which items it stands for, and each text part
where its text came from, in keys the counting and the compressors ignore.

Back (``from_view``): a message that stands for items becomes those ORIGINAL items, unchanged unless a
text part was excerpted (then a copy of the item with that text replaced); a message the compressors
made (the summary) becomes a user message item. The result must keep every group (``items.groups``)
whole, in order, and contiguous, and may not change read-only text; otherwise ``TransformFailed``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from gateway.core.front import TransformFailed
from gateway.fronts.responses.items import (
    OPAQUE_FIELDS,
    REASONING,
    Item,
    call_id_of,
    group_of,
    groups,
    input_items,
    is_call,
    is_message,
    is_output,
    kind_of,
)

Message = dict[str, Any]

ITEMS = "_gateway_items"
"""On a view message: the positions of the input items it stands for."""
SOURCE = "_gateway_source"
"""On a text part: ``[item position, field, part position or -1, editable]``."""
INSTRUCTIONS = "_gateway_instructions"
TEXT_PARTS = frozenset({"input_text", "output_text", "text", "summary_text", "reasoning_text"})


def to_view(body: Mapping[str, Any]) -> list[Message]:
    """The request's instructions and input as chat-style messages (see the module docstring)."""
    messages: list[Message] = []
    instructions = body.get("instructions")
    if isinstance(instructions, str) and instructions:
        part = {"type": "text", "text": instructions}
        messages.append({"role": "system", "content": [part], INSTRUCTIONS: True})
    items = input_items(body)
    pending: list[int] = []
    calls_open = False
    for index, item in enumerate(items):
        if kind_of(item) == REASONING:
            pending.append(index)
            continue
        if is_call(item) and calls_open:
            message = messages[-1]
            message["tool_calls"].append(_call_entry(item))
        else:
            message = _message(item, index)
            messages.append(message)
        _fold(message, items, pending)
        message[ITEMS].append(index)
        pending = []
        calls_open = is_call(item)
    if pending:
        message = {"role": "assistant", "content": None, ITEMS: []}
        _fold(message, items, pending)
        messages.append(message)
    return messages


def from_view(body: Mapping[str, Any], messages: Sequence[Message]) -> list[Item]:
    """The input items for ``messages`` (the view of ``body``, as a transform left it)."""
    items = input_items(body)
    result: list[Item] = []
    origin: list[int | None] = []
    for message in messages:
        if message.get(INSTRUCTIONS):
            continue
        indices = message.get(ITEMS)
        if not isinstance(indices, list):
            result.append(_made_item(message))
            origin.append(None)
            continue
        edits = _edits(message, items)
        for index in indices:
            result.append(_edited(items[index], edits.get(index, ())))
            origin.append(index)
    _check_groups(origin, groups(items))
    return result


# --- to the view ---------------------------------------------------------------------------------


def _message(item: Item, index: int) -> Message:
    if is_message(item):
        role = item.get("role") if isinstance(item.get("role"), str) else "user"
        return {"role": role, "content": _parts(item.get("content"), index, "content"), ITEMS: []}
    if is_call(item):
        return {"role": "assistant", "content": None, "tool_calls": [_call_entry(item)], ITEMS: []}
    if is_output(item):
        output = item.get("output")
        if isinstance(output, str | list):
            content = _parts(output, index, "output")
        else:
            content = [_opaque_part(output, index)]
        return {"role": "tool", "tool_call_id": call_id_of(item), "content": content, ITEMS: []}
    return {"role": "system", "content": [_opaque_part(_bare(item), index)], ITEMS: []}


def _parts(content: Any, index: int, field: str) -> list[Any]:
    if isinstance(content, str):
        return [_text(content, index, field, -1, editable=True)]
    if not isinstance(content, list):
        return []
    parts: list[Any] = []
    for number, part in enumerate(content):
        if not isinstance(part, Mapping):
            parts.append({"type": "unknown"})
            continue
        kind = part.get("type")
        if kind in TEXT_PARTS and isinstance(part.get("text"), str):
            parts.append(_text(part["text"], index, field, number, editable=True))
        elif kind == "refusal":
            parts.append({"type": "refusal", "refusal": part.get("refusal")})
        elif kind == "input_image":
            url = part.get("image_url") if isinstance(part.get("image_url"), str) else ""
            parts.append({"type": "image_url", "image_url": {"url": url, "detail": part.get("detail")}})
        else:
            parts.append({"type": kind if isinstance(kind, str) else "unknown"})
    return parts


def _text(text: str, index: int, field: str, number: int, *, editable: bool) -> dict[str, Any]:
    return {"type": "text", "text": text, SOURCE: [index, field, number, editable]}


def _opaque_part(value: Any, index: int) -> dict[str, Any]:
    return _text(orjson.dumps(value).decode(), index, "", -1, editable=False)


def _bare(item: Mapping[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in item.items() if key not in OPAQUE_FIELDS}


def _call_entry(item: Item) -> dict[str, Any]:
    kind = kind_of(item)
    call_id = call_id_of(item)
    if kind == "custom_tool_call":
        return {
            "id": call_id,
            "type": "custom",
            "custom": {"name": item.get("name"), "input": item.get("input")},
        }
    if kind == "function_call":
        function = {"name": item.get("name"), "arguments": item.get("arguments")}
    else:
        rest = {k: v for k, v in _bare(item).items() if k not in ("type", "call_id", "status")}
        function = {"name": kind, "arguments": orjson.dumps(rest).decode()}
    return {"id": call_id, "type": "function", "function": function}


def _fold(message: Message, items: Sequence[Item], reasoning: Sequence[int]) -> None:
    """Reasoning items go with the message of the item after them; their summaries read-only."""
    if not reasoning:
        return
    parts: list[Any] = []
    for index in reasoning:
        for field in ("summary", "content"):
            value = items[index].get(field)
            for number, part in enumerate(value if isinstance(value, list) else ()):
                if isinstance(part, Mapping) and isinstance(part.get("text"), str):
                    parts.append(_text(part["text"], index, field, number, editable=False))
    content = message.get("content")
    if parts or content is not None:
        message["content"] = [*parts, *(content if isinstance(content, list) else ())]
    message[ITEMS].extend(reasoning)


# --- back to items -------------------------------------------------------------------------------

Edit = tuple[str, int, str]


def _edits(message: Message, items: Sequence[Item]) -> dict[int, list[Edit]]:
    """The text parts a transform changed, by item: (field, part position or -1, new text)."""
    edits: dict[int, list[Edit]] = {}
    content = message.get("content")
    for part in content if isinstance(content, list) else ():
        source = part.get(SOURCE) if isinstance(part, Mapping) else None
        if not isinstance(source, list):
            continue
        index, field, number, editable = source
        text = part.get("text")
        original = _source_text(items[index], field, number)
        if text is original or text == original:
            continue
        if not editable:
            raise TransformFailed("a transform changed opaque content (a reasoning summary or a tool item)")
        edits.setdefault(index, []).append((field, number, str(text)))
    return edits


def _source_text(item: Item, field: str, number: int) -> Any:
    if not field:
        return orjson.dumps(_bare(item)).decode()
    value = item.get(field)
    if number < 0:
        return value
    part = value[number] if isinstance(value, list) and number < len(value) else None
    return part.get("text") if isinstance(part, Mapping) else None


def _edited(item: Item, edits: Sequence[Edit]) -> Item:
    if not edits:
        return item
    copy = dict(item)
    for field, number, text in edits:
        if number < 0:
            copy[field] = text
        else:
            parts = list(copy[field])
            parts[number] = {**parts[number], "text": text}
            copy[field] = parts
    return copy


def _made_item(message: Message) -> Item:
    """A message the compressors wrote (the summary): a message item of the same role."""
    role = message.get("role") if isinstance(message.get("role"), str) else "user"
    kind = "output_text" if role == "assistant" else "input_text"
    content = message.get("content")
    if isinstance(content, list):
        text = "\n".join(str(part.get("text", "")) for part in content if isinstance(part, Mapping))
    else:
        text = content if isinstance(content, str) else ""
    return {"type": "message", "role": role, "content": [{"type": kind, "text": text}]}


def _check_groups(origin: Sequence[int | None], all_groups: Sequence[range]) -> None:
    """Every group in the result is whole, in order and contiguous; kept items keep their order."""
    owner = group_of(all_groups)
    positions: dict[int, list[int]] = {}
    last = -1
    for position, index in enumerate(origin):
        if index is None:
            continue
        if index <= last:
            raise TransformFailed("a transform reordered the input items")
        last = index
        positions.setdefault(owner[index], []).append(position)
    for number, found in positions.items():
        group = all_groups[number]
        if len(found) != len(group) or found[-1] - found[0] != len(group) - 1:
            raise TransformFailed(
                "a transform would separate items that go together (a reasoning item and the item "
                "after it, or a call and its output)"
            )
