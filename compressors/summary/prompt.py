"""The cheap model's prompt (fresh, continued and merge forms) and the check of its three sections.

The continued form shows the summary of the earlier part as context and asks for a summary of the
messages after it only: that summary becomes a part of its own, placed after the earlier one, which
stays as it is (see ``compressor``). Merging the parts into one is the merge form.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from compressors.protocols import Message

PROMPT_VERSION = "summary-v1"
"""Part of every cache key: change it whenever the prompt changes what a summary says."""

SECTIONS = ("User goal", "Confirmed conclusions", "Open todos")

INSTRUCTIONS = """\
You summarise the earlier part of a conversation between a user and an AI assistant, so that the \
assistant can carry on from your summary alone. The summary replaces those messages.

Write the summary in the language the conversation is written in. Use exactly these three markdown \
headings, in English and in this order, each on its own line:
## User goal
## Confirmed conclusions
## Open todos

- User goal: what the user wants overall, with every requirement and constraint they stated.
- Confirmed conclusions: facts established, decisions taken, results of tool calls, errors met and how \
they were resolved.
- Open todos: what is still pending, what was being worked on last, and the next step.

Copy exactly, never paraphrase: identifiers, numbers, names, file paths, URLs, commands, code symbols, \
versions, dates, decisions, and the user's requirements (quote them verbatim in quotation marks). Leave \
out greetings and repetition. Do not invent anything, do not answer the user and do not continue the \
conversation. Write "None." under a heading that has nothing to report. "[image]", "[audio]" and \
"[file]" stand for attachments you cannot see."""

STRICT = """\
Your previous answer could not be used because it lacked the required headings. Answer with the summary \
only: start with the line "## User goal", then "## Confirmed conclusions", then "## Open todos", spelled \
exactly like that, each on its own line with its content below it."""


def build_prompt(*, summaries: Sequence[str], transcript: str | None, strict: bool = False) -> list[Message]:
    """A fresh prompt (transcript only), a continued one (the earlier summaries as context, then the
    turns after them, to be summarised alone) or a merge of consecutive summaries (summaries only)."""
    if transcript is None and not summaries:
        raise ValueError("a prompt needs a transcript, summaries or both")
    system = INSTRUCTIONS + ("\n\n" + STRICT if strict else "")
    return [
        {"role": "system", "content": system},
        {"role": "user", "content": _material(summaries, transcript)},
    ]


def _material(summaries: Sequence[str], transcript: str | None) -> str:
    if transcript is None:
        parts = "\n\n".join(
            f'<summary part="{n}">\n{text}\n</summary>' for n, text in enumerate(summaries, start=1)
        )
        return (
            "Here are summaries of consecutive parts of one conversation, oldest first:\n\n"
            f"{parts}\n\nMerge them into one summary of the whole conversation. When a later part "
            "settles a todo of an earlier part, move it to the conclusions."
        )
    if not summaries:
        return f"Summarise this conversation:\n\n<transcript>\n{transcript}\n</transcript>"
    earlier = "\n\n".join(summaries)
    return (
        "Here is the summary of the earlier part of the conversation, for context only:\n\n"
        f"<summary>\n{earlier}\n</summary>\n\nHere are the messages that came after it:\n\n"
        f"<transcript>\n{transcript}\n</transcript>\n\n"
        "Summarise only these later messages. The earlier summary stays as it is and is read together "
        "with yours, so do not repeat it: under the user goal, write what these messages add to or "
        'change in the goal (or "None."); under the conclusions, what they establish, including earlier '
        "todos they settle; under the open todos, everything still pending at their end, earlier todos "
        "included."
    )


_WORDS = {
    "User goal": r"user(?:'s|s)?\s+goals?",
    "Confirmed conclusions": r"confirmed\s+conclusions?",
    "Open todos": r"open\s+to[\s-]?dos?",
}
_LEAD = r"^[ \t]*(?P<hashes>#{1,6}[ \t]*)?(?:(?:\d+[.)]|[-*+])[ \t]+)?[*_]{0,2}[ \t]*"
_HEADINGS = {
    name: re.compile(_LEAD + words + r"(?P<tail>.*)$", re.I | re.M) for name, words in _WORDS.items()
}


def missing_sections(text: str) -> list[str]:
    """The sections with no heading line in ``text``.

    A heading is a line holding the section's name in any case, optionally as a markdown heading
    (``## User goal``), bold or italic (``**User goal**``), numbered or bulleted, and optionally ending
    in a colon with content on the same line (``**User goal:** ship it``); a sentence that merely starts
    with the words (``User goal is ...``) is not a heading unless it is a markdown heading.
    """
    return [
        name for name, pattern in _HEADINGS.items() if not any(_is_heading(m) for m in pattern.finditer(text))
    ]


def _is_heading(match: re.Match[str]) -> bool:
    tail = match.group("tail").lstrip("*_ \t")
    return bool(match.group("hashes")) or tail == "" or tail.startswith((":", "-", "\u2013", "\u2014"))


def clean(text: str) -> str:
    """The answer without surrounding whitespace or a code fence wrapped around all of it."""
    text = text.strip()
    if text.startswith("```") and text.endswith("```") and text.count("\n") >= 1:
        text = text[text.index("\n") + 1 : -3].strip()
    return text
