"""Finding what to cut (the documents) and what to rank it against (the question).

The rules, exactly:

* A **text block** is a message's string ``content`` or one ``{"type": "text"}`` part of a list
  ``content``. Blocks of ``system`` and ``developer`` messages are never documents.
* A block is a **document** when it has more than ``document_min_tokens`` tokens. A block whose UTF-8
  size is at most that many bytes cannot be one (a token is at least one byte), so only larger blocks
  are counted, and they are counted by chunking them (the chunking adds up their tokens).
* The **latest user message** is the last message whose role is ``user``. The **question** is:

  1. when that message has no document: its text blocks, joined by blank lines;
  2. when it has a document and also other text blocks: those that come after its last document, or,
     when none does, those before it (joined by blank lines);
  3. when its text is documents only: the trailing paragraph of its last text block (below).
  4. when there is no user message: empty (the excerpts are then taken in document order).

* The **trailing paragraph** of a user's document block is cut off the document and kept verbatim
  after its excerpts: in the case of rule 3 it is the question; elsewhere it is kept so that the same
  block always yields the same document, and so the same cached index, whichever turn it is in. It is
  searched for in the block's last ``question_max_chars`` characters (trailing whitespace ignored): it
  is the text after the last blank line there; without a blank line, after the last line break;
  without one, after the last sentence end (``.!?`` followed by whitespace, or the ideographic full
  stop and full-width ``!?``); without one, those last ``question_max_chars`` characters themselves.
  Blocks of other roles (tool results, assistant turns) are documents whole.

Everything that is not a document (system prompts, the question, the other turns, tool calls, images)
is kept verbatim.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from compressors.messages import INSTRUCTION_ROLES
from compressors.protocols import Message

_BLANK_LINE = re.compile(r"\n[ \t]*\n\s*")
_LINE_BREAK = re.compile(r"\n\s*")
_SENTENCE_END = re.compile(
    "[.!?][\"')\\]\u201d\u2019]*\\s+|[\u3002\uff01\uff1f][\u300d\u300f\uff09\u201d\u2019]*\\s*"
)


@dataclass(frozen=True, slots=True)
class Block:
    """One text block: ``part`` is None for a string content, else the index in the content list."""

    message: int
    part: int | None
    role: str
    text: str


@dataclass(frozen=True, slots=True)
class Document:
    """A document and where it lives: ``block.text[:end]``; ``block.text[end:]`` is a question tail."""

    block: Block
    end: int

    @property
    def text(self) -> str:
        return self.block.text[: self.end] if self.end < len(self.block.text) else self.block.text

    @property
    def tail(self) -> str:
        return self.block.text[self.end :]


@dataclass(frozen=True, slots=True)
class Layout:
    documents: tuple[Document, ...]
    question: str


def text_blocks(messages: Sequence[Message]) -> list[Block]:
    blocks = []
    for index, message in enumerate(messages):
        role = str(message.get("role", ""))
        content = message.get("content")
        if isinstance(content, str):
            blocks.append(Block(index, None, role, content))
        elif isinstance(content, list):
            for part_index, part in enumerate(content):
                if (
                    isinstance(part, dict)
                    and part.get("type") == "text"
                    and isinstance(part.get("text"), str)
                ):
                    blocks.append(Block(index, part_index, role, part["text"]))
    return blocks


def replace_block(messages: list[Message], block: Block, text: str) -> None:
    """Put in ``messages`` a copy of the block's message whose block says ``text`` (the original
    message and its content list are left untouched)."""
    message = dict(messages[block.message])
    if block.part is None:
        message["content"] = text
    else:
        content = list(message["content"])
        content[block.part] = {**content[block.part], "text": text}
        message["content"] = content
    messages[block.message] = message


def may_be_document(block: Block, min_tokens: int) -> bool:
    """False when the block cannot have more than ``min_tokens`` tokens (or is never a document)."""
    if block.role in INSTRUCTION_ROLES:
        return False
    length = len(block.text)
    if length > min_tokens:
        return True
    if 4 * length <= min_tokens:
        return False
    return len(block.text.encode("utf-8", "surrogatepass")) > min_tokens


def question_start(text: str, max_chars: int) -> int:
    """Where the trailing paragraph of a user block starts (see the module docstring)."""
    end = len(text.rstrip())
    window = max(0, end - max_chars)
    for pattern in (_BLANK_LINE, _LINE_BREAK, _SENTENCE_END):
        found = [match.end() for match in pattern.finditer(text, window, end) if match.end() < end]
        if found:
            return found[-1]
    return window


def document_end(block: Block, max_chars: int) -> int:
    """Where the document in ``block`` ends: before the trailing paragraph of a user block."""
    return question_start(block.text, max_chars) if block.role == "user" else len(block.text)


def layout(
    blocks: Sequence[Block], user: int | None, is_document: Callable[[Block], bool], max_chars: int
) -> Layout:
    """The documents and the question, given which blocks are documents (see the module rules)."""
    documents = tuple(
        Document(block, document_end(block, max_chars)) for block in blocks if is_document(block)
    )
    own = [block for block in blocks if block.message == user] if user is not None else []
    own_documents = [block for block in own if is_document(block)]
    own_text = [block for block in own if not is_document(block)]
    if not own_documents:
        question = _joined(own_text)
    elif own_text:
        last_document = own.index(own_documents[-1])
        after = [block for block in own[last_document + 1 :] if not is_document(block)]
        question = _joined(after or own_text)
    else:
        question = own[-1].text[document_end(own[-1], max_chars) :].strip()
    return Layout(documents, question)


def _joined(blocks: Sequence[Block]) -> str:
    return "\n\n".join(block.text.strip() for block in blocks if block.text.strip())
