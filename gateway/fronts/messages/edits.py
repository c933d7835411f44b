"""Writing a transform's changes back into copies of the request's messages (``view.from_view``).

A message comes back as the ORIGINAL object when all its blocks are kept unchanged; otherwise as a copy
with the blocks kept, in order, their changed text written where it came from (``parts.SOURCE``) into
copies of the blocks (the request's own objects are never changed). Read-only text a transform changed
(a thinking block, a block shown as JSON) fails the transform.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gateway.core.front import TransformFailed
from gateway.fronts.messages.parts import READ_ONLY, SOURCE, STRING_CONTENT, block_parts

Edit = tuple[int, int, str, str]
"""(block, inner block or -1, field, new text)."""


def edits_of(view: Mapping[str, Any], message: Any, blocks: Sequence[int]) -> list[Edit]:
    """The text a transform changed in ``view``, the view of ``blocks`` of ``message``: a part's text, or
    a tool message's whole content (an excerpt of a tool output is written as a string)."""
    content = view.get("content")
    if isinstance(content, str):
        if view.get("role") != "tool" or len(blocks) != 1:
            raise TransformFailed("a transform rewrote a message the gateway cannot rewrite")
        number = blocks[0]
        if _source_text(message, number, -1, "content") == content:
            return []
        return [(number, -1, "content", content)]
    edits: list[Edit] = []
    for part in content if isinstance(content, list) else ():
        source = part.get(SOURCE) if isinstance(part, Mapping) else None
        if not isinstance(source, list):
            continue
        _, number, inner, field, editable = source
        text = part.get("text")
        if field == READ_ONLY:
            unchanged = text in _shown(block_at(message, number, inner))
        else:
            original = _source_text(message, number, inner, field)
            unchanged = text is original or text == original
        if unchanged:
            continue
        if not editable:
            raise TransformFailed(
                "a transform changed text the gateway must send as it is (a thinking block, a tool block)"
            )
        edits.append((number, inner, field, str(text)))
    return edits


def _shown(block: Any) -> set[str]:
    """Every text the view shows of ``block`` (its texts, or its JSON)."""
    return {
        part["text"]
        for part in block_parts(block, 0, 0, -1)
        if isinstance(part, Mapping) and isinstance(part.get("text"), str)
    }


def block_at(message: Any, number: int, inner: int) -> Any:
    content = message.get("content") if isinstance(message, Mapping) else None
    if number == STRING_CONTENT or not isinstance(content, list) or number >= len(content):
        return None
    block = content[number]
    if inner < 0:
        return block
    nested = block.get("content") if isinstance(block, Mapping) else None
    return nested[inner] if isinstance(nested, list) and inner < len(nested) else None


def _source_text(message: Any, number: int, inner: int, field: str) -> Any:
    if number == STRING_CONTENT:
        return message.get("content") if isinstance(message, Mapping) else None
    block = block_at(message, number, inner)
    if not isinstance(block, Mapping):
        return None
    if field == "source":
        source = block.get("source")
        return source.get("data") if isinstance(source, Mapping) else None
    if field == "source.content":
        source = block.get("source")
        return source.get("content") if isinstance(source, Mapping) else None
    return block.get(field)


def rebuilt(message: Any, blocks: Sequence[int], edits: Sequence[Edit]) -> Any:
    """``message`` itself when every block is kept unchanged, else a copy with the kept, edited blocks."""
    content = message.get("content") if isinstance(message, Mapping) else None
    if not edits and list(blocks) == _all_blocks(content):
        return message
    assert isinstance(message, Mapping)
    if isinstance(content, str):
        return {**message, "content": edits[-1][3] if edits else content}
    assert isinstance(content, list)
    by_block: dict[int, list[Edit]] = {}
    for edit in edits:
        by_block.setdefault(edit[0], []).append(edit)
    kept = [_edited_block(content[number], by_block.get(number, ())) for number in blocks]
    return {**message, "content": kept}


def _all_blocks(content: Any) -> list[int]:
    """The block positions of a message's ``content`` as the view's ``ORIGIN`` names them."""
    if isinstance(content, list):
        return list(range(len(content)))
    return [STRING_CONTENT] if isinstance(content, str) else []


def _edited_block(block: Any, edits: Sequence[Edit]) -> Any:
    if not edits:
        return block
    copy = dict(block)
    for _, inner, field, text in edits:
        if inner >= 0:
            nested = list(copy["content"])
            nested[inner] = _set(nested[inner], field, text)
            copy["content"] = nested
        elif field == "content":
            copy["content"] = _excerpted_content(block.get("content"), text)
        else:
            copy = _set(copy, field, text)
    return copy


def _set(block: Mapping[str, Any], field: str, text: str) -> dict[str, Any]:
    if field == "source":
        return {**block, "source": {**block["source"], "data": text}}
    return {**block, field: text}


def _excerpted_content(content: Any, text: str) -> Any:
    """A tool result's content cut to ``text``: a string, or one text block keeping the breakpoint of the
    last inner block that had one."""
    if isinstance(content, list):
        marks = [
            item["cache_control"] for item in content if isinstance(item, Mapping) and "cache_control" in item
        ]
        if marks:
            return [{"type": "text", "text": text, "cache_control": marks[-1]}]
    return text
