"""What one content block shows in the chat-style view: its parts (``view``'s module docstring).

A text part says where its text came from in ``SOURCE``: ``[message, block, inner block or -1, field,
editable]``, the field being where the text is written back (``text``, ``content`` for a tool result's
string content, ``source`` for a plain-text document's data) or a read-only one (``thinking``, a
document's ``title`` and ``context``, ``READ_ONLY`` for a block shown as its JSON or a search result).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

SOURCE = "_gateway_source"
"""On a text part: ``[message, block, inner block or -1, field, editable]``."""
STRING_CONTENT = -1
"""The block position of a message's string ``content``."""
READ_ONLY = ""
"""The field of a part printed as JSON, or of text the view cannot write back."""


def block_parts(block: Any, index: int, number: int, inner: int) -> list[Any]:
    """The view parts of one block (``inner``: its place in a tool result's content, else -1)."""
    if not isinstance(block, Mapping):
        return []
    kind = block.get("type")
    if kind == "text":
        text = block.get("text")
        return [text_part(text, index, number, inner, "text", editable=True)] if isinstance(text, str) else []
    if kind == "thinking":
        text = block.get("thinking")
        return (
            [text_part(text, index, number, inner, "thinking", editable=False)]
            if isinstance(text, str)
            else []
        )
    if kind == "redacted_thinking":
        data = block.get("data")
        return [{"type": "opaque", "data": data}] if isinstance(data, str) else []
    if kind == "image":
        return [{"type": "image", "source": block.get("source")}]
    if kind == "document":
        return _document(block, index, number, inner)
    if kind == "search_result":
        return _search_result(block, index, number, inner)
    return [printed(block, index, number, inner)]


def _document(block: Mapping[str, Any], index: int, number: int, inner: int) -> list[Any]:
    parts = [
        text_part(block[field], index, number, inner, field, editable=False)
        for field in ("title", "context")
        if isinstance(block.get(field), str)
    ]
    source = block.get("source")
    kind = source.get("type") if isinstance(source, Mapping) else None
    if kind == "text" and isinstance(source, Mapping):
        data = source.get("data")
        if isinstance(data, str):
            parts.append(text_part(data, index, number, inner, "source", editable=True))
    elif kind == "content" and isinstance(source, Mapping):
        content = source.get("content")
        if isinstance(content, str):
            parts.append(text_part(content, index, number, inner, "source.content", editable=False))
        for item in content if isinstance(content, list) else ():
            if isinstance(item, Mapping) and item.get("type") == "text" and isinstance(item.get("text"), str):
                parts.append(text_part(item["text"], index, number, inner, READ_ONLY, editable=False))
            elif isinstance(item, Mapping) and item.get("type") == "image":
                parts.append({"type": "image", "source": item.get("source")})
            elif isinstance(item, Mapping):
                parts.append(printed(item, index, number, inner))
    else:
        parts.append({"type": "document", "source": source})
    return parts


def _search_result(block: Mapping[str, Any], index: int, number: int, inner: int) -> list[Any]:
    parts = [
        text_part(block[field], index, number, inner, READ_ONLY, editable=False)
        for field in ("source", "title")
        if isinstance(block.get(field), str)
    ]
    content = block.get("content")
    for item in content if isinstance(content, list) else ():
        if isinstance(item, Mapping) and isinstance(item.get("text"), str):
            parts.append(text_part(item["text"], index, number, inner, READ_ONLY, editable=False))
    return parts


def text_part(
    text: str, index: int, number: int, inner: int, field: str, *, editable: bool
) -> dict[str, Any]:
    return {"type": "text", "text": text, SOURCE: [index, number, inner, field, editable]}


def printed(block: Mapping[str, Any], index: int, number: int, inner: int) -> dict[str, Any]:
    """A block the adapter does not read, as its JSON without ``cache_control`` (read-only)."""
    bare = {key: value for key, value in block.items() if key != "cache_control"}
    return text_part(orjson.dumps(bare).decode(), index, number, inner, READ_ONLY, editable=False)
