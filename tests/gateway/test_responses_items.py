"""Input items: their groups, the chat-style view and back, and their token count."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from gateway.core.front import TransformFailed, countable
from gateway.fronts.responses.counting import count_responses, image_parts
from gateway.fronts.responses.items import groups, input_items
from gateway.fronts.responses.view import ITEMS, from_view, to_view
from tests.factories import shared_counter
from tests.mock.responses import ENCRYPTED


def user(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def said(text: str) -> dict[str, Any]:
    return {
        "type": "message",
        "role": "assistant",
        "id": "msg_1",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def reasoning(n: int, summary: str = "") -> dict[str, Any]:
    parts = [{"type": "summary_text", "text": summary}] if summary else []
    return {"type": "reasoning", "id": f"rs_{n}", "summary": parts, "encrypted_content": ENCRYPTED}


def call(call_id: str, name: str = "shell") -> dict[str, Any]:
    return {
        "type": "function_call",
        "id": f"fc_{call_id}",
        "call_id": call_id,
        "name": name,
        "arguments": '{"cmd": "ls"}',
    }


def output(call_id: str, text: str = "file.txt") -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call_id, "output": text}


@pytest.mark.parametrize(
    ("items", "expected"),
    [
        ([user("a"), said("b")], [[0], [1]]),
        ([user("a"), reasoning(1), said("b")], [[0], [1, 2]]),
        ([user("a"), reasoning(1), call("c1"), output("c1"), said("b")], [[0], [1, 2, 3], [4]]),
        # parallel calls, then their outputs: one group
        ([call("c1"), call("c2"), output("c1"), output("c2")], [[0, 1, 2, 3]]),
        # reasoning between a call and its output is taken in
        ([call("c1"), reasoning(1), output("c1"), user("x")], [[0, 1, 2], [3]]),
        # an output whose call is not in the input (stored upstream) stands alone
        ([output("c9"), user("x")], [[0], [1]]),
        # unknown types pass as their own group; reasoning chains join the next item
        (
            [{"type": "web_search_call", "id": "ws_1"}, reasoning(1), reasoning(2), said("b")],
            [[0], [1, 2, 3]],
        ),
        ([user("a"), reasoning(1)], [[0], [1]]),
    ],
)
def test_groups_keep_reasoning_and_pairs_together(
    items: list[dict[str, Any]], expected: list[list[int]]
) -> None:
    assert [list(group) for group in groups(items)] == expected


def test_input_items_reads_a_string_as_one_user_message() -> None:
    assert input_items({"input": "hello"}) == [{"type": "message", "role": "user", "content": "hello"}]
    assert input_items({}) == []


def history() -> list[dict[str, Any]]:
    return [
        {"role": "developer", "content": "Be brief."},
        user("list the files"),
        reasoning(1, "I should run ls"),
        call("c1"),
        output("c1", "a.txt\nb.txt"),
        reasoning(2),
        said("Two files."),
        user("and now?"),
        {"type": "item_reference", "id": "msg_old"},
        {"type": "compaction", "id": "cmp_1", "encrypted_content": ENCRYPTED},
    ]


def test_view_maps_items_to_chat_messages_and_back_to_the_same_objects() -> None:
    body = {"instructions": "You are a coding agent.", "input": history()}
    view = to_view(body)
    roles = [message["role"] for message in view]
    assert roles == [
        "system",
        "developer",
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
        "system",
        "system",
    ]
    assert view[3]["tool_calls"][0]["function"] == {"name": "shell", "arguments": '{"cmd": "ls"}'}
    assert view[3][ITEMS] == [2, 3]  # the reasoning item goes with the call after it
    assert view[3]["content"][0]["text"] == "I should run ls"
    assert view[4]["tool_call_id"] == "c1"
    back = from_view(body, view)
    assert all(a is b for a, b in zip(back, body["input"], strict=True))


def test_view_maps_a_summary_to_a_message_item_and_keeps_the_rest_whole() -> None:
    body = {"input": history()}
    view = to_view(body)
    summary = {"role": "user", "content": "[Summary] earlier work"}
    back = from_view(body, [view[0], summary, *view[5:]])
    assert back[0] is body["input"][0]
    assert back[1] == {
        "type": "message",
        "role": "user",
        "content": [{"type": "input_text", "text": "[Summary] earlier work"}],
    }
    assert back[2:] == body["input"][7:]
    assert orjson.dumps(back[-1]) == orjson.dumps(body["input"][-1])  # encrypted content survives


@pytest.mark.parametrize("dropped", [2, 3])  # the call's message alone, or the tool answer alone
def test_view_refuses_to_separate_a_call_from_its_output(dropped: int) -> None:
    body = {"input": history()}
    view = to_view(body)
    kept = [message for index, message in enumerate(view) if index != dropped]
    with pytest.raises(TransformFailed, match="separate"):
        from_view(body, kept)


def test_view_writes_excerpted_text_into_a_copy_of_the_item() -> None:
    body = {"input": history()}
    view = to_view(body)
    tool = dict(view[3])
    tool["content"] = [{**tool["content"][0], "text": "[excerpts] a.txt"}]
    back = from_view(body, [*view[:3], tool, *view[4:]])
    assert back[4] == {"type": "function_call_output", "call_id": "c1", "output": "[excerpts] a.txt"}
    assert body["input"][4]["output"] == "a.txt\nb.txt"  # the request's own item is untouched


def test_view_refuses_changes_to_opaque_text() -> None:
    body = {"input": history()}
    view = to_view(body)
    changed = dict(view[2])
    changed["content"] = [{**changed["content"][0], "text": "rewritten"}, *changed["content"][1:]]
    with pytest.raises(TransformFailed, match="opaque"):
        from_view(body, [*view[:2], changed, *view[3:]])


def test_count_matches_the_equivalent_chat_request() -> None:
    tools_flat = [
        {
            "type": "function",
            "name": "shell",
            "description": "Run a command.",
            "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}},
        }
    ]
    tools_chat = [
        {
            "type": "function",
            "function": {key: value for key, value in tools_flat[0].items() if key != "type"},
        }
    ]
    body = {
        "instructions": "You are a coding agent.",
        "input": [user("list the files"), call("c1"), output("c1", "a.txt"), said("Done.")],
        "tools": tools_flat,
    }
    chat = {
        "messages": [
            {"role": "system", "content": "You are a coding agent."},
            {"role": "user", "content": "list the files"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "shell", "arguments": '{"cmd": "ls"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "a.txt"},
            {"role": "assistant", "content": "Done."},
        ],
        "tools": tools_chat,
    }
    counter = shared_counter()
    counted = count_responses(counter, "gpt-5.4", body)
    assert counted.total == counter.count_chat("gpt-5.4", chat).total
    assert counted.tools > 0 and not counted.approximate


def test_count_covers_images_and_reasoning_summaries_and_marks_opaque_content() -> None:
    counter = shared_counter()
    image = {"type": "input_image", "image_url": "https://example.com/cat.png", "detail": "low"}
    plain = {"input": [user("look")]}
    with_image = {
        "input": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "look"}, image]}
        ]
    }
    assert image_parts(with_image) == 1
    assert count_responses(counter, "gpt-5.4", with_image).images > 0
    thought = {"input": [user("look"), reasoning(1, "a long chain of thought about the cat")]}
    assert (
        count_responses(counter, "gpt-5.4", thought).total > count_responses(counter, "gpt-5.4", plain).total
    )
    assert count_responses(counter, "gpt-5.4", thought).approximate


def test_a_turn_is_counted_by_its_content_wherever_it_stands() -> None:
    """The counter caches per message by content: the adapter's positions must not be part of it."""
    turns: list[dict[str, Any]] = [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": f"turn {n}"}]}
        for n in range(4)
    ]
    whole = [countable(message) for message in to_view({"input": turns})]
    trimmed = [countable(message) for message in to_view({"input": turns[2:]})]
    assert whole[2:] == trimmed
    assert "_gateway_" not in orjson.dumps(whole).decode()


@pytest.mark.parametrize(
    ("stray", "expected_groups"),
    [
        ({**user("run it"), "call_id": "c1"}, [[0], [1, 2], [3]]),
        ({"role": "user", "content": "run it", "call_id": "c1"}, [[0], [1, 2], [3]]),  # by its role
        ({**reasoning(1, "plan"), "call_id": "c1"}, [[0, 1, 2], [3]]),  # goes with the call after it
    ],
)
def test_view_a_message_or_reasoning_with_a_call_id_is_not_a_call(
    stray: dict[str, Any], expected_groups: list[list[int]]
) -> None:
    """A stray ``call_id`` made a message a call: the call after it was appended to a message without
    ``tool_calls`` (``KeyError``), and the message was grouped with that call's output."""
    body = {"input": [stray, call("c1"), output("c1"), said("done")]}
    view = to_view(body)
    assert [message["role"] for message in view][-3:] == ["assistant", "tool", "assistant"]
    assert view[-3]["tool_calls"] == [
        {"id": "c1", "type": "function", "function": {"name": "shell", "arguments": '{"cmd": "ls"}'}}
    ]
    assert all(a is b for a, b in zip(from_view(body, view), body["input"], strict=True))
    assert count_responses(shared_counter(), "gpt-5.4", body).total > 0
    assert [list(group) for group in groups(body["input"])] == expected_groups


def test_groups_an_output_is_not_tied_to_a_message_with_its_call_id() -> None:
    items = [{**user("run it"), "call_id": "c1"}, output("c1")]
    assert [list(group) for group in groups(items)] == [[0], [1]]
