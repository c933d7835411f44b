"""The blocks of a Messages request that must stay together, and the check that a transform kept them so.

- A tool call and its result: a ``tool_use`` block of an assistant message and the ``tool_result`` block
  answering it (same id) in the next message, a user message whose results come first. The API rejects a
  result without its call right before it, and a call without its result right after it, so both are
  kept (the results in the message directly after the call's) or both summarised.
- A ``thinking`` or ``redacted_thinking`` block and the assistant message it is in: its signature
  vouches for it only there, byte for byte. The view shows an assistant message as ONE message, so it is
  kept or summarised whole, and shows thinking as read-only text, so no transform edits it.

Messages keep their order; a message may lose some of its blocks (a user message whose results went into
a summary while its own text is kept), never have them reordered.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gateway.core.front import TransformFailed

SPLIT_PAIR = (
    "a transform would separate a tool call from its result (a tool_use block and the tool_result "
    "answering it in the next message)"
)


@dataclass(frozen=True, slots=True)
class Kept:
    """One message of a transform's result: the request's message at ``origin`` with the ``blocks`` kept
    (positions in its content; ``-1`` a string content), or ``origin`` None for a message it made."""

    origin: int | None
    blocks: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class ToolPair:
    """The tool calls of the assistant message at ``call`` that the next message answers."""

    call: int
    uses: tuple[int, ...]
    """Positions of the ``tool_use`` blocks answered."""
    results: tuple[int, ...]
    """Positions of the ``tool_result`` blocks in message ``call + 1`` that answer them."""


def tool_pairs(messages: Sequence[Any]) -> list[ToolPair]:
    pairs: list[ToolPair] = []
    for index in range(len(messages) - 1):
        message, answer = messages[index], messages[index + 1]
        if not _has_role(message, "assistant") or not _has_role(answer, "user"):
            continue
        uses = _blocks_by_id(message, "tool_use", "id")
        results = _blocks_by_id(answer, "tool_result", "tool_use_id")
        answered = uses.keys() & results.keys()
        if answered:
            pairs.append(
                ToolPair(
                    call=index,
                    uses=tuple(sorted(n for key in answered for n in uses[key])),
                    results=tuple(sorted(n for key in answered for n in results[key])),
                )
            )
    return pairs


def check_groups(messages: Sequence[Any], kept: Sequence[Kept]) -> None:
    """Raise ``TransformFailed`` unless ``kept`` keeps the messages in order and every tool pair whole."""
    position: dict[int, int] = {}
    last = -1
    for number, piece in enumerate(kept):
        if piece.origin is None:
            continue
        if piece.origin <= last:
            raise TransformFailed("a transform reordered the messages or split one of them")
        if list(piece.blocks) != sorted(set(piece.blocks)):
            raise TransformFailed("a transform reordered the blocks of a message")
        last = piece.origin
        position[piece.origin] = number
    for pair in tool_pairs(messages):
        here, answer = position.get(pair.call), position.get(pair.call + 1)
        results = set(kept[answer].blocks) & set(pair.results) if answer is not None else set()
        if here is None and results:
            raise TransformFailed(SPLIT_PAIR)
        if here is not None and (results != set(pair.results) or answer != here + 1):
            raise TransformFailed(SPLIT_PAIR)


def _has_role(message: Any, role: str) -> bool:
    return isinstance(message, Mapping) and message.get("role") == role


def _blocks_by_id(message: Mapping[str, Any], kind: str, key: str) -> dict[str, list[int]]:
    content = message.get("content")
    found: dict[str, list[int]] = {}
    for number, block in enumerate(content if isinstance(content, list) else ()):
        if isinstance(block, Mapping) and block.get("type") == kind and isinstance(block.get(key), str):
            found.setdefault(block[key], []).append(number)
    return found
