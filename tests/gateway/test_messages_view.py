"""The Messages adapter: content blocks to chat-style messages and back, groups kept whole, the original
message objects returned, the cache breakpoint after a summary, and at most four breakpoints."""

from __future__ import annotations

import copy
from typing import Any

import orjson
import pytest

from compressors.retrieval.documents import replace_block, text_blocks
from compressors.summary.assembly import summary_message
from compressors.summary.excerpts import excerpt_message
from gateway.core.front import TransformFailed
from gateway.fronts.messages.breakpoints import EPHEMERAL, EPHEMERAL_1H, count, locations
from gateway.fronts.messages.groups import tool_pairs
from gateway.fronts.messages.view import BREAKPOINTS, ORIGIN, SYSTEM, from_view, to_view
from gateway.tokens.adapter import ModelTokens
from tests.compressors.test_summary_fakes import make_settings
from tests.factories import shared_counter

SIGNATURE = "EqQBCkYIBxgCKkBdyn1rO0c7+X0rJ6k3k1L9QeTgVZmY4vPnV3kqN+3L2s4=="
CONTROL = {"type": "ephemeral"}


def user(text: str, **extra: Any) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text, **extra}]}


def said(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": [{"type": "text", "text": text}]}


def calls(*ids: str, thinking: str | None = None) -> dict[str, Any]:
    blocks: list[dict[str, Any]] = []
    if thinking is not None:
        blocks.append({"type": "thinking", "thinking": thinking, "signature": SIGNATURE})
    blocks.append({"type": "text", "text": "Let me look."})
    blocks.extend(
        {"type": "tool_use", "id": i, "name": "Read", "input": {"file_path": f"/src/{i}.py", "limit": 20}}
        for i in ids
    )
    return {"role": "assistant", "content": blocks}


def results(*ids: str, text: str | None = None, **extra: Any) -> dict[str, Any]:
    blocks: list[dict[str, Any]] = [
        {"type": "tool_result", "tool_use_id": i, "content": f"contents of {i}\n" * 3, **extra} for i in ids
    ]
    if text is not None:
        blocks.append({"type": "text", "text": text})
    return {"role": "user", "content": blocks}


def body_of(messages: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {
        "model": "claude-sonnet-4-5",
        "max_tokens": 1024,
        "system": [{"type": "text", "text": "You are a coding agent.", "cache_control": CONTROL}],
        "messages": messages,
        **extra,
    }


def agent() -> dict[str, Any]:
    return body_of(
        [
            user("fix the build"),
            calls("t1", thinking="The build log first."),
            results("t1", text="<reminder>be brief</reminder>"),
            calls("t2", "t3"),
            results("t2", "t3"),
            said("Fixed two files."),
            user("and the tests?", cache_control=CONTROL),
        ]
    )


def summary(first: int = 1, last: int = 5) -> dict[str, Any]:
    return summary_message("## User goal\nfix the build", first=first, last=last)


def test_view_shows_blocks_as_chat_messages_and_gives_back_the_same_objects() -> None:
    body = agent()
    view = to_view(body)
    assert [message["role"] for message in view] == [
        "system",
        "user",
        "assistant",
        "tool",
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
        "user",
    ]
    assert view[0][SYSTEM] and view[0]["content"] == [{"type": "text", "text": "You are a coding agent."}]
    assert view[2]["tool_calls"] == [
        {
            "type": "function",
            "function": {"name": "Read", "arguments": '{"file_path":"/src/t1.py","limit":20}'},
            "id": "t1",
        }
    ]
    assert view[2]["content"][0]["text"] == "The build log first."  # thinking as read-only text
    assert (view[3]["tool_call_id"], view[3][ORIGIN]) == ("t1", [2, [0]])
    assert view[4][ORIGIN] == [2, [1]]  # the text after the results is the user's own message
    assert [m[BREAKPOINTS] for m in view] == [[300], [], [], [], [], [], [], [], [], [300]]
    back = from_view(body, view)
    assert all(a is b for a, b in zip(back["messages"], body["messages"], strict=True))
    assert back["system"] is body["system"]


def test_view_of_a_string_content_and_a_string_system() -> None:
    body = {"system": "Be brief.", "messages": [{"role": "user", "content": "hi"}]}
    view = to_view(body)
    assert [m["role"] for m in view] == ["system", "user"]
    assert view[1]["content"][0]["text"] == "hi"
    edited = copy.deepcopy(view)
    edited[1]["content"][0]["text"] = "hello"
    assert from_view(body, edited)["messages"] == [{"role": "user", "content": "hello"}]
    assert body["messages"] == [{"role": "user", "content": "hi"}]


def test_view_replaces_the_summarised_turns_keeps_the_rest_and_marks_the_summary_for_the_cache() -> None:
    body = agent()
    view = to_view(body)
    compacted = [view[0], summary(), *view[8:]]
    back = from_view(body, compacted)
    messages = back["messages"]
    assert messages[0] == {
        "role": "user",
        "content": [{"type": "text", "text": summary()["content"], "cache_control": EPHEMERAL}],
    }
    assert messages[1] is body["messages"][5] and messages[2] is body["messages"][6]
    assert back["system"] is body["system"]
    assert count(back) == 3


def test_view_keeps_the_users_text_of_a_message_whose_tool_results_were_summarised() -> None:
    body = agent()
    view = to_view(body)
    kept_text = view[4]  # "<reminder>" after the results of t1, the rest of message 2
    back = from_view(body, [view[0], summary(1, 3), kept_text, *view[5:]])
    assert back["messages"][1] == {"role": "user", "content": [body["messages"][2]["content"][1]]}
    assert back["messages"][1]["content"][0] is body["messages"][2]["content"][1]
    assert back["messages"][2:] == body["messages"][3:]
    assert all(a is b for a, b in zip(back["messages"][2:], body["messages"][3:], strict=True))


@pytest.mark.parametrize(
    "dropped",
    [
        [2],  # the call without its result
        [3],  # the result without its call
        [6],  # one of two parallel results
        [5],  # the calls whose results are kept
    ],
)
def test_view_refuses_to_separate_a_tool_call_from_its_result(dropped: list[int]) -> None:
    body = agent()
    view = to_view(body)
    kept = [message for index, message in enumerate(view) if index not in dropped]
    with pytest.raises(TransformFailed, match="separate a tool call from its result"):
        from_view(body, kept)


def test_view_refuses_a_message_between_a_call_and_its_result() -> None:
    body = agent()
    view = to_view(body)
    with pytest.raises(TransformFailed, match="separate a tool call"):
        from_view(body, [*view[:6], {"role": "user", "content": "recalled"}, *view[6:]])


def test_view_refuses_reordered_messages() -> None:
    body = agent()
    view = to_view(body)
    with pytest.raises(TransformFailed, match="reordered"):
        from_view(body, [view[0], view[9], *view[1:9]])


def test_view_keeps_thinking_and_its_signature_byte_for_byte_and_refuses_to_edit_it() -> None:
    body = agent()
    view = to_view(body)
    back = from_view(body, [view[0], summary(1, 1), *view[2:]])
    assert orjson.dumps(back["messages"][1]) == orjson.dumps(body["messages"][1])
    edited = copy.deepcopy(view)
    edited[2]["content"][0]["text"] = "something else"
    with pytest.raises(TransformFailed, match="thinking"):
        from_view(body, edited)


def test_view_refuses_to_edit_a_block_it_shows_as_json() -> None:
    body = body_of(
        [
            {
                "role": "assistant",
                "content": [
                    {"type": "server_tool_use", "id": "s1", "name": "web_search", "input": {"q": "x"}},
                    {"type": "web_search_tool_result", "tool_use_id": "s1", "content": []},
                ],
            },
            user("next"),
        ]
    )
    view = to_view(body)
    assert orjson.loads(view[1]["content"][0]["text"])["name"] == "web_search"
    assert from_view(body, view)["messages"][0] is body["messages"][0]
    edited = copy.deepcopy(view)
    edited[1]["content"][1]["text"] = "{}"
    with pytest.raises(TransformFailed):
        from_view(body, edited)


def test_view_writes_an_excerpted_tool_output_into_a_copy_of_its_result() -> None:
    long_output = "\n".join(f"line {n} of the build log" for n in range(400))
    body = body_of(
        [
            user("build"),
            calls("t1"),
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "t1", "content": long_output, "is_error": True}
                ],
            },
            said("failed"),
            user("why?"),
        ]
    )
    view = to_view(body)
    counter = ModelTokens(shared_counter(), "claude-sonnet-4-5")
    settings = make_settings(excerpt_head_tokens=20, excerpt_tail_tokens=20)
    shorter = excerpt_message(view[3], settings, counter)
    assert shorter is not None
    back = from_view(body, [*view[:3], shorter, *view[4:]])
    result = back["messages"][2]["content"][0]
    [part] = shorter["content"]  # the view's part, cut in place
    assert result == {
        "type": "tool_result",
        "tool_use_id": "t1",
        "content": part["text"],  # back in the block's own shape: a string
        "is_error": True,
    }
    assert "left out by the gateway" in result["content"]
    assert body["messages"][2]["content"][0]["content"] == long_output
    assert back["messages"][3] is body["messages"][3]


def test_view_keeps_the_breakpoint_of_an_excerpted_tool_output_with_blocks() -> None:
    body = body_of(
        [
            calls("t1"),
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "t1",
                        "content": [
                            {"type": "text", "text": "x " * 500},
                            {"type": "text", "text": "y " * 500, "cache_control": CONTROL},
                        ],
                    }
                ],
            },
        ]
    )
    view = to_view(body)
    assert view[2][BREAKPOINTS] == [300]
    cut = {**view[2], "content": "x x [… cut …] y y"}
    back = from_view(body, [*view[:2], cut])
    assert back["messages"][1]["content"][0]["content"] == [
        {"type": "text", "text": "x x [… cut …] y y", "cache_control": CONTROL}
    ]


def test_view_retrieval_excerpt_replaces_one_text_block_in_a_copy_of_its_message() -> None:
    image = {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}}
    document = {"type": "text", "text": "the report\n\n" * 200}
    question = {"type": "text", "text": "what is in it?", "cache_control": CONTROL}
    body = body_of([{"role": "user", "content": [image, document, question]}])
    view = to_view(body)
    messages = list(view)
    block = next(b for b in text_blocks(messages) if b.text == document["text"])
    replace_block(messages, block, "[excerpts 1/9] the report")
    back = from_view(body, messages)
    content = back["messages"][0]["content"]
    assert content[0] is image and content[2] is question
    assert content[1] == {"type": "text", "text": "[excerpts 1/9] the report"}
    assert body["messages"][0]["content"][1] is document and document["text"].startswith("the report")


def test_view_retrieval_excerpt_of_a_plain_text_document() -> None:
    document = {
        "type": "document",
        "source": {"type": "text", "media_type": "text/plain", "data": "chapter one. " * 300},
        "title": "Manual",
        "cache_control": CONTROL,
    }
    body = body_of([{"role": "user", "content": [document, {"type": "text", "text": "summarise"}]}])
    view = to_view(body)
    part = next(p for p in view[1]["content"] if p["text"].startswith("chapter"))
    edited = copy.deepcopy(view)
    edited[1]["content"][view[1]["content"].index(part)]["text"] = "[excerpt] chapter one."
    back = from_view(body, edited)
    assert back["messages"][0]["content"][0] == {
        **document,
        "source": {"type": "text", "media_type": "text/plain", "data": "[excerpt] chapter one."},
    }
    title = copy.deepcopy(view)
    title[1]["content"][0]["text"] = "Other"
    with pytest.raises(TransformFailed):
        from_view(body, title)


def many_breakpoints(*, later_ttl: str | None = None) -> dict[str, Any]:
    control: dict[str, Any] = {"type": "ephemeral", **({"ttl": later_ttl} if later_ttl else {})}
    body = agent()
    body["system"] = [
        {"type": "text", "text": "You are a coding agent.", "cache_control": EPHEMERAL_1H},
        {"type": "text", "text": "Rules.", "cache_control": EPHEMERAL_1H},
    ]
    body["messages"][5] = {
        "role": "assistant",
        "content": [{"type": "text", "text": "x", "cache_control": control}],
    }
    body["messages"][6] = user("and the tests?", cache_control=control)
    return body


def test_view_drops_the_earliest_client_breakpoint_to_stay_within_four() -> None:
    body = many_breakpoints()
    assert count(body) == 4
    view = to_view(body)
    back = from_view(body, [view[0], summary(), *view[8:]])
    assert count(back) == 4
    assert [where for where, _ in locations(back)] == [
        ("system", 1, -1, -1),
        ("messages", 0, 0, -1),
        ("messages", 1, 0, -1),
        ("messages", 2, 0, -1),
    ]
    assert back["system"][0] == {"type": "text", "text": "You are a coding agent."}
    assert back["system"][1] is body["system"][1]
    assert "cache_control" in body["system"][0]  # the request's own objects are untouched
    assert back["messages"][1] is body["messages"][5]


def test_view_summary_breakpoint_lasts_an_hour_when_a_later_one_does() -> None:
    body = many_breakpoints(later_ttl="1h")
    view = to_view(body)
    back = from_view(body, [view[0], summary(), *view[8:]])
    assert back["messages"][0]["content"][-1]["cache_control"] == EPHEMERAL_1H


def test_view_top_level_cache_control_is_a_breakpoint_on_the_last_message() -> None:
    body = {**agent(), "cache_control": CONTROL}
    view = to_view(body)
    assert view[-1][BREAKPOINTS] == [300, 300]
    back = from_view(body, [view[0], summary(), *view[8:]])
    assert count(back) == 4


def test_view_without_a_summary_adds_no_breakpoint() -> None:
    body = agent()
    view = to_view(body)
    recalled = {"role": "user", "content": "[Excerpts recalled by the gateway] ..."}
    back = from_view(body, [*view, recalled])
    assert back["messages"][-1] == {
        "role": "user",
        "content": [{"type": "text", "text": "[Excerpts recalled by the gateway] ..."}],
    }
    assert count(back) == count(body)


def test_tool_pairs_are_the_calls_the_next_message_answers() -> None:
    messages = agent()["messages"]
    pairs = tool_pairs(messages)
    assert [(pair.call, pair.uses, pair.results) for pair in pairs] == [(1, (2,), (0,)), (3, (1, 2), (0, 1))]
    assert tool_pairs([calls("t9"), user("no answer")]) == []
