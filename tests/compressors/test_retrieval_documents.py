from __future__ import annotations

from typing import Any

import pytest

from compressors.messages import latest_user
from compressors.retrieval.documents import (
    Block,
    Document,
    document_end,
    layout,
    may_be_document,
    question_start,
    text_blocks,
)

DOC = "D" * 50
"""A stand-in for a document: the tests decide which blocks are documents by their text."""


def _is_document(block: Block) -> bool:
    return block.text.startswith(DOC)


def _plan(messages: list[dict[str, Any]]) -> tuple[list[str], str, list[str]]:
    blocks = text_blocks(messages)
    plan = layout(blocks, latest_user(messages), _is_document, 2_000)
    return [document.text for document in plan.documents], plan.question, [d.tail for d in plan.documents]


def test_text_blocks_reads_strings_and_text_parts() -> None:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "be brief"},
        {
            "role": "user",
            "content": [{"type": "image_url", "image_url": {"url": "x"}}, {"type": "text", "text": "hi"}],
        },
        {"role": "assistant", "content": None, "tool_calls": []},
        {"role": "tool", "content": "result"},
    ]
    assert text_blocks(messages) == [
        Block(0, None, "system", "be brief"),
        Block(1, 1, "user", "hi"),
        Block(3, None, "tool", "result"),
    ]


@pytest.mark.parametrize(
    ("role", "text", "expected"),
    [
        ("user", "a" * 101, True),
        ("user", "a" * 100, False),
        ("user", "a" * 25, False),
        ("user", "\u00e9" * 60, True),  # 60 characters, 120 bytes
        ("user", "\u00e9" * 50, False),  # 100 bytes
        ("tool", "a" * 500, True),
        ("assistant", "a" * 500, True),
        ("system", "a" * 500, False),
        ("developer", "a" * 500, False),
    ],
)
def test_may_be_document_bounds_tokens_by_bytes(role: str, text: str, expected: bool) -> None:
    assert may_be_document(Block(0, None, role, text), 100) is expected


@pytest.mark.parametrize(
    ("text", "question"),
    [
        ("Long document.\n\nMore of it.\n\nWhat is X?", "What is X?"),
        ("Long document.\n\nWhat is X?\n\n  \n", "What is X?\n\n  \n"),
        ("Long document.\n \t\nFirst line\nsecond line", "First line\nsecond line"),
        ("Long document.\nlast line without blank", "last line without blank"),
        ("One line. Another sentence. So what is X?", "So what is X?"),
        ("\u6587\u6863\u3002\u95ee\u9898\u662f\u4ec0\u4e48\uff1f", "\u95ee\u9898\u662f\u4ec0\u4e48\uff1f"),
        ("nopunctuationatall", "nopunctuationatall"),
    ],
)
def test_question_start_takes_the_trailing_paragraph(text: str, question: str) -> None:
    assert text[question_start(text, 2_000) :] == question


def test_question_start_looks_back_at_most_max_chars() -> None:
    text = "Document.\n\n" + "word " * 1_000
    start = question_start(text, 100)
    assert len(text.rstrip()) - start == 100


def test_latest_user_is_the_last_user_message() -> None:
    messages = [{"role": "user"}, {"role": "assistant"}, {"role": "user"}, {"role": "tool"}]
    assert latest_user(messages) == 2
    assert latest_user([{"role": "system"}]) is None


def test_layout_question_is_the_latest_user_text_without_documents() -> None:
    documents, question, tails = _plan(
        [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": DOC + " the report.\n\nPlease read it."},
            {"role": "tool", "content": DOC + " a tool result.\n\nLast line."},
            {"role": "assistant", "content": "Read it."},
            {"role": "user", "content": "What is the revenue?"},
        ]
    )
    assert documents == [DOC + " the report.\n\n", DOC + " a tool result.\n\nLast line."]
    assert tails == ["Please read it.", ""]
    assert question == "What is the revenue?"


def test_layout_question_is_the_text_after_the_document_in_its_message() -> None:
    documents, question, _ = _plan(
        [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Here it is:"},
                    {"type": "text", "text": DOC + " body.\n\nEnd of body."},
                    {"type": "text", "text": "What is the revenue?"},
                ],
            }
        ]
    )
    assert documents == [DOC + " body.\n\n"]
    assert question == "What is the revenue?"


def test_layout_question_falls_back_to_text_before_the_document() -> None:
    _, question, _ = _plan(
        [{"role": "user", "content": [{"type": "text", "text": "Summarise:"}, {"type": "text", "text": DOC}]}]
    )
    assert question == "Summarise:"


def test_layout_lone_document_block_gives_its_trailing_paragraph() -> None:
    text = DOC + " body.\n\nMore body.\n\nWhat is the code?"
    documents, question, tails = _plan([{"role": "user", "content": text}])
    assert question == "What is the code?"
    assert documents == [DOC + " body.\n\nMore body.\n\n"]
    assert tails == ["What is the code?"]


def test_layout_two_lone_documents_ask_the_tail_of_the_last() -> None:
    first, second = DOC + " one.\n\nFirst tail.", DOC + " two.\n\nAnd the question?"
    documents, question, tails = _plan(
        [{"role": "user", "content": [{"type": "text", "text": first}, {"type": "text", "text": second}]}]
    )
    assert documents == [DOC + " one.\n\n", DOC + " two.\n\n"]
    assert tails == ["First tail.", "And the question?"]
    assert question == "And the question?"


def test_layout_without_user_message_has_no_question() -> None:
    documents, question, _ = _plan(
        [{"role": "system", "content": "x"}, {"role": "tool", "content": DOC + "\n\nx"}]
    )
    assert documents == [DOC + "\n\nx"]
    assert question == ""


def test_layout_system_prompt_is_never_a_document_and_never_the_question() -> None:
    messages = [{"role": "system", "content": DOC}, {"role": "user", "content": "Q?"}]
    blocks = text_blocks(messages)
    plan = layout(blocks, 1, lambda b: _is_document(b) and may_be_document(b, 10), 2_000)
    assert plan.documents == ()
    assert plan.question == "Q?"


@pytest.mark.parametrize(
    ("role", "end"),
    [("user", len("body\n\n")), ("tool", len("body\n\nlast")), ("assistant", len("body\n\nlast"))],
)
def test_document_end_cuts_the_trailing_paragraph_of_user_blocks_only(role: str, end: int) -> None:
    assert document_end(Block(0, None, role, "body\n\nlast"), 2_000) == end


def test_document_text_and_tail_split_the_block() -> None:
    block = Block(0, None, "user", "body\n\nquestion")
    document = Document(block, 6)
    assert document.text + document.tail == block.text
    assert Document(block, len(block.text)).text is block.text
