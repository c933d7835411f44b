from __future__ import annotations

import pytest

from compressors.protocols import Message
from compressors.summary.prompt import INSTRUCTIONS, STRICT, build_prompt, clean, missing_sections
from compressors.summary.selection import Block
from compressors.summary.transcript import content_text, render_block, render_message

ALL = ("User goal", "Confirmed conclusions", "Open todos")


@pytest.mark.parametrize(
    "text",
    [
        "## User goal\nx\n## Confirmed conclusions\ny\n## Open todos\nz",
        "# USER GOAL\nx\n### confirmed conclusions\ny\n###### Open TODOs\nz",
        "**User goal**\nx\n**Confirmed conclusions**\ny\n**Open todos**\nz",
        "**User goal:** ship it\n**Confirmed conclusions:** none\n**Open to-dos:** none",
        "User goal: x\nConfirmed conclusions: y\nOpen todos: z",
        "1. **User Goal**\nx\n2. **Confirmed Conclusions**\ny\n3. **Open To-Dos**\nz",
        "- __User goal__ - x\n- _Confirmed conclusions_ \u2014 y\n- *Open todo*: z",
        "## User's goal\nx\n## Confirmed conclusion\ny\n## Open to dos\nz",
        "## Open todos\nz\n## User goal\nx\n## Confirmed conclusions\ny",
        "  ## User goal (in short)\nx\n## Confirmed conclusions\ny\n## Open todos\nz",
    ],
)
def test_missing_sections_accepts_markdown_heading_forms(text: str) -> None:
    assert missing_sections(text) == []


@pytest.mark.parametrize(
    ("text", "missing"),
    [
        ("", list(ALL)),
        ("## User goal\nx\n## Confirmed conclusions\ny", ["Open todos"]),
        ("The user goal is x.\n## Confirmed conclusions\ny\n## Open todos\nz", ["User goal"]),
        ("User goal is x\nConfirmed conclusions are y\nOpen todos remain", list(ALL)),
        ("## Goal\nx\n## Conclusions\ny\n## Todos\nz", list(ALL)),
        ("## User goal\nx\nWe have confirmed conclusions here\n## Open todos\nz", ["Confirmed conclusions"]),
    ],
)
def test_missing_sections_names_what_is_absent(text: str, missing: list[str]) -> None:
    assert missing_sections(text) == missing


def test_clean_strips_whitespace_and_a_fence_around_everything() -> None:
    assert clean("  ```markdown\n## User goal\nx\n```  ") == "## User goal\nx"
    assert clean("\n## User goal\nx `code`\n") == "## User goal\nx `code`"


def test_build_prompt_fresh_puts_the_instructions_first_and_the_transcript_in_the_user_message() -> None:
    prompt = build_prompt(summaries=[], transcript="[2] user: hi")
    assert [m["role"] for m in prompt] == ["system", "user"]
    assert prompt[0]["content"] == INSTRUCTIONS
    assert "<transcript>\n[2] user: hi\n</transcript>" in prompt[1]["content"]
    assert "<summary" not in prompt[1]["content"]


def test_build_prompt_continued_shows_the_earlier_summary_as_context_and_asks_for_the_newer_only() -> None:
    content = build_prompt(summaries=["OLD SUMMARY"], transcript="[9] user: more")[1]["content"]
    assert content.index("OLD SUMMARY") < content.index("[9] user: more")
    assert "for context only" in content and "Summarise only these later messages" in content
    assert "updated summary" not in content


def test_build_prompt_merge_numbers_the_parts_in_order() -> None:
    content = build_prompt(summaries=["A", "B", "C"], transcript=None)[1]["content"]
    assert content.index('part="1">\nA') < content.index('part="2">\nB') < content.index('part="3">\nC')
    assert "<transcript>" not in content


def test_build_prompt_strict_adds_the_stricter_instruction() -> None:
    assert build_prompt(summaries=[], transcript="t", strict=True)[0]["content"].endswith(STRICT)
    assert STRICT not in build_prompt(summaries=[], transcript="t")[0]["content"]


def test_build_prompt_needs_something_to_summarise() -> None:
    with pytest.raises(ValueError, match="needs"):
        build_prompt(summaries=[], transcript=None)


def test_instructions_ask_for_the_sections_the_language_and_exact_identifiers() -> None:
    for name in ALL:
        assert f"## {name}" in INSTRUCTIONS
    assert "language the conversation is written in" in INSTRUCTIONS
    assert "identifiers, numbers, names, file paths" in INSTRUCTIONS
    assert "quote them verbatim" in INSTRUCTIONS


@pytest.mark.parametrize(
    ("content", "text"),
    [
        (None, ""),
        ("plain", "plain"),
        (
            [
                {"type": "text", "text": "look:"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
                {"type": "input_audio", "input_audio": {"data": "BBBB", "format": "wav"}},
                {"type": "file", "file": {"file_id": "f1"}},
                {"type": "refusal", "refusal": "no"},
                {"type": "video"},
                "bare",
                7,
            ],
            "look:\n[image]\n[audio]\n[file]\n(refused: no)\n[video]\nbare\n7",
        ),
        ({"odd": 1}, '{"odd":1}'),
    ],
)
def test_content_text_turns_parts_into_text_and_placeholders(content: object, text: str) -> None:
    assert content_text(content) == text


def test_render_message_shows_role_name_tool_calls_and_results() -> None:
    call: Message = {
        "role": "assistant",
        "content": "checking",
        "name": "bot",
        "refusal": "partly",
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "grep", "arguments": '{"q": "x"}'}},
            {"id": "c2", "type": "function", "function": {"name": "ls", "arguments": {"dir": "/"}}},
            "garbage",
        ],
    }
    assert render_message(call, number=4) == (
        "[4] assistant (bot): checking\n(refused: partly)\n"
        '-> tool call c1: grep({"q": "x"})\n-> tool call c2: ls({"dir":"/"})\n-> tool call: "garbage"'
    )
    answer: Message = {"role": "tool", "tool_call_id": "c1", "content": "found"}
    assert render_message(answer, number=5) == "[5] tool (result of call c1): found"
    legacy: Message = {
        "role": "assistant",
        "content": None,
        "function_call": {"name": "f", "arguments": "{}"},
    }
    assert render_message(legacy, number=1) == "[1] assistant:\n-> tool call: f({})"


def test_render_block_numbers_messages_by_their_position_in_the_request() -> None:
    messages: list[Message] = [{"role": "system", "content": "s"}, {"role": "user", "content": "hi"}]
    assert render_block(messages, Block((1,))) == "[2] user: hi"
