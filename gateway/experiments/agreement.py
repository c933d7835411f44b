"""How far a candidate's answer agrees with the primary's, from 0 (not at all) to 1 (the same).

- **Tools**, when either answer called one: the same tools in the same order (``same_tool``) and, for
  those, arguments equal as parsed JSON (``same_args``; as text when they do not parse). Score 1 for the
  same calls with the same arguments, 0.5 for the same tools with other arguments, 0 otherwise.
- **Text**: the cosine similarity of the two answers' embeddings when an embedding model is configured
  (clamped at 0), else a normalised token overlap: the F1 score of the two bags of lower-cased words,
  which is 1 for the same words in any order and falls with every word only one answer has.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import orjson

from gateway.experiments.answer import Answer, ToolCall

_WORD = re.compile(r"\w+", re.UNICODE)


@dataclass(frozen=True, slots=True)
class Agreement:
    kind: Literal["tool", "text"]
    score: float
    method: Literal["tool", "embedding", "overlap"]
    same_tool: bool | None = None
    same_args: bool | None = None

    def to_dict(self) -> dict[str, object]:
        return {
            "kind": self.kind,
            "score": round(self.score, 4),
            "method": self.method,
            "same_tool": self.same_tool,
            "same_args": self.same_args,
        }


def uses_tools(primary: Answer, candidate: Answer) -> bool:
    return bool(primary.calls or candidate.calls)


def agreement(primary: Answer, candidate: Answer, *, similarity: float | None = None) -> Agreement:
    """``similarity``: the cosine of the two texts' embeddings, when they were embedded."""
    if uses_tools(primary, candidate):
        same_tool = [call.name for call in primary.calls] == [call.name for call in candidate.calls]
        same_args = same_tool and all(
            same_arguments(mine, theirs) for mine, theirs in zip(primary.calls, candidate.calls, strict=True)
        )
        score = 1.0 if same_args else 0.5 if same_tool else 0.0
        return Agreement("tool", score, "tool", same_tool=same_tool, same_args=same_args)
    if similarity is not None:
        return Agreement("text", max(0.0, min(1.0, similarity)), "embedding")
    return Agreement("text", token_overlap(primary.text, candidate.text), "overlap")


def same_arguments(first: ToolCall, second: ToolCall) -> bool:
    try:
        return bool(orjson.loads(first.arguments or "{}") == orjson.loads(second.arguments or "{}"))
    except orjson.JSONDecodeError:
        return first.arguments.strip() == second.arguments.strip()


def token_overlap(first: str, second: str) -> float:
    """The F1 score of the two texts' bags of words: 1.0 for two empty texts."""
    mine, theirs = Counter(_words(first)), Counter(_words(second))
    if not mine and not theirs:
        return 1.0
    common = sum((mine & theirs).values())
    if common == 0:
        return 0.0
    precision = common / sum(theirs.values())
    recall = common / sum(mine.values())
    return 2 * precision * recall / (precision + recall)


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def cosine(first: Sequence[float], second: Sequence[float]) -> float:
    dot = sum(a * b for a, b in zip(first, second, strict=True))
    norms = math.sqrt(sum(a * a for a in first)) * math.sqrt(sum(b * b for b in second))
    return dot / norms if norms else 0.0
