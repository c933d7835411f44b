"""Thinking blocks left out of a request sent to another model, everything else as the client sent it."""

from __future__ import annotations

from typing import Any

import orjson

from gateway.fronts.messages.thinking import without_foreign_thinking, without_thinking

SIGNATURE = "EqQBCkYIBxgCKkBdyn1rO0c7+X0rJ6k3k1L9QeTgVZmY4vPnV3kqN+3L2s4=="


def thinking(text: str = "Let me see.") -> dict[str, Any]:
    return {"type": "thinking", "thinking": text, "signature": SIGNATURE}


def conversation() -> dict[str, Any]:
    return {
        "model": "claude-opus-4-5",
        "max_tokens": 2048,
        "thinking": {"type": "enabled", "budget_tokens": 1024},
        "messages": [
            {"role": "user", "content": "list the files"},
            {
                "role": "assistant",
                "content": [
                    thinking(),
                    {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4a"},
                    {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"cmd": "ls"}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "t1", "content": "a.txt"},
                    {"type": "thinking", "thinking": "not the assistant's", "signature": "x"},
                ],
            },
            {"role": "assistant", "content": [thinking("only thinking")]},
            {
                "role": "user",
                "content": [{"type": "text", "text": "go on", "cache_control": {"type": "ephemeral"}}],
            },
        ],
    }


def test_without_thinking_drops_the_assistants_thinking_and_keeps_every_other_message() -> None:
    body = conversation()
    before = orjson.dumps(body)
    kept, dropped = without_thinking(body)
    assert dropped == 3
    messages = kept["messages"]
    assert len(messages) == 4  # the assistant message of thinking alone is left out
    assert messages[1] == {"role": "assistant", "content": [body["messages"][1]["content"][2]]}
    assert messages[0] is body["messages"][0]
    assert messages[2] is body["messages"][2]  # a user message's blocks are not the assistant's thinking
    assert messages[3] is body["messages"][4]
    assert kept["thinking"] == body["thinking"] and orjson.dumps(body) == before


def test_without_thinking_keeps_a_last_assistant_message_left_empty() -> None:
    body = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": [thinking()]}]}
    kept, dropped = without_thinking(body)
    assert dropped == 1 and kept["messages"][-1] == {"role": "assistant", "content": []}


def test_without_thinking_gives_back_the_body_itself_when_there_is_none() -> None:
    body = {
        "model": "m",
        "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}],
    }
    assert without_thinking(body) == (body, 0) and without_thinking(body)[0] is body
    assert without_thinking({"messages": "broken"}) == ({"messages": "broken"}, 0)


def test_without_foreign_thinking_drops_only_for_another_model() -> None:
    body = conversation()
    same, none = without_foreign_thinking(body, "claude-opus-4-5")
    assert same is body and none == 0
    other, dropped = without_foreign_thinking(body, "claude-sonnet-4-5")
    assert dropped == 3 and other["model"] == "claude-opus-4-5"
