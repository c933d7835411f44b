"""The optional judge: a model that grades the candidate's answer against the primary's, 0 to 10."""

from __future__ import annotations

import re

from compressors.protocols import Message
from gateway.experiments.answer import Answer

JUDGE_MAX_TOKENS = 16
"""The judge answers with one number; its output cap (and the budget hold of its call) is small."""
EXCERPT_CHARS = 6_000
"""Of the question and each answer, the judge sees at most this much (the end of the question, where
the latest request is, and the start of each answer)."""
_SCORE = re.compile(r"\b(10|[0-9])(?:\.\d+)?\b")


def judge_messages(rubric: str, question: str, primary: Answer, candidate: Answer) -> list[Message]:
    return [
        {
            "role": "system",
            "content": f"{rubric}\n\nAnswer with the grade alone: one whole number from 0 to 10.",
        },
        {
            "role": "user",
            "content": (
                f"CONVERSATION (its latest part):\n{question[-EXCERPT_CHARS:]}\n\n"
                f"ANSWER A:\n{_shown(primary)}\n\nANSWER B:\n{_shown(candidate)}"
            ),
        },
    ]


def _shown(answer: Answer) -> str:
    calls = "".join(f"\n[calls {call.name}({call.arguments})]" for call in answer.calls)
    return (answer.text[:EXCERPT_CHARS] + calls) or "(empty)"


def parse_grade(text: str) -> float | None:
    """The first whole number from 0 to 10 in the judge's answer, as a share of 10; None without one."""
    found = _SCORE.search(text)
    return int(found.group(1)) / 10 if found else None
