"""The mock upstream's scripted agent (``tests.mock.agent``), which the real-client smoke runs rely on to make
turns long: it reads the project's files with the tool the client offers, one call after another, then
answers; its project is seeded; requests that do not offer its tools get the mock's usual answers."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from tests.mock.agent import AgentScript, write_project
from tests.mock.anthropic import signature_for
from tests.mock.upstream import create_mock_app

ANTHROPIC = {"x-api-key": "sk-upstream", "anthropic-version": "2023-06-01"}
EXEC = {"type": "function", "name": "exec_command", "parameters": {"type": "object"}}
READ = {"name": "Read", "description": "Read a file", "input_schema": {"type": "object"}}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    write_project(tmp_path / "project", files=4, seed=3, min_tokens=200, max_tokens=400)
    return tmp_path / "project"


@pytest.fixture
def mock(project: Path) -> Iterator[TestClient]:
    with TestClient(create_mock_app(AgentScript.of(project, calls=2))) as client:
        yield client


def responses_turn(mock: TestClient, prompt: str, history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Play one Codex-like turn: run the agent's calls (``cat``) until it answers; the items it produced."""
    items = [
        *history,
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": prompt}]},
    ]
    produced: list[dict[str, Any]] = []
    for _ in range(10):
        body = {"model": "gpt-5.4", "input": items, "tools": [EXEC], "reasoning": {"effort": "low"}}
        output = mock.post("/v1/responses", json=body).json()["output"]
        assert output[0]["type"] == "reasoning"
        produced.extend(output[1:])
        items.extend(output[1:])
        last = output[-1]
        if last["type"] == "message":
            return produced
        command = json.loads(last["arguments"])["cmd"]
        result = Path(command.removeprefix("cat ")).read_text()
        items.append({"type": "function_call_output", "call_id": last["call_id"], "output": result})
    raise AssertionError("the agent never answered")


def test_the_agent_reads_its_turns_files_with_exec_command_then_answers(
    mock: TestClient, project: Path
) -> None:
    files = sorted(path.resolve() for path in project.rglob("*") if path.is_file())
    first = responses_turn(mock, "Turn 1: read the next files", [])
    calls = [item for item in first if item["type"] == "function_call"]
    assert [json.loads(call["arguments"]) for call in calls] == [
        {"cmd": f"cat {files[0]}", "max_output_tokens": 30000},
        {"cmd": f"cat {files[1]}", "max_output_tokens": 30000},
    ]
    assert first[-1]["content"][0]["text"] == (
        f"Turn 1 done: I read {files[0].name}, {files[1].name}. "
        "The request still showed the facts of 2 of these 2 files."
    )
    second = responses_turn(mock, "Turn 2: and the next", [])
    assert [json.loads(item["arguments"])["cmd"] for item in second if item["type"] == "function_call"] == [
        f"cat {files[2]}",
        f"cat {files[3]}",
    ]


def test_the_answer_counts_only_the_facts_the_request_still_shows(mock: TestClient) -> None:
    prompt = {"type": "message", "role": "user", "content": "Turn 1: go"}
    calls = [
        {
            "type": "function_call",
            "call_id": f"call_agent_t1_s{step}_1",
            "name": "exec_command",
            "arguments": "{}",
        }
        for step in range(2)
    ]
    outputs = [
        {"type": "function_call_output", "call_id": calls[0]["call_id"], "output": "(cut by the gateway)"},
        {"type": "function_call_output", "call_id": calls[1]["call_id"], "output": "(cut by the gateway)"},
    ]
    items = [prompt, calls[0], outputs[0], calls[1], outputs[1]]
    output = mock.post("/v1/responses", json={"model": "gpt-5.4", "input": items, "tools": [EXEC]}).json()[
        "output"
    ]
    assert output[-1]["content"][0]["text"].endswith("showed the facts of 0 of these 2 files.")


def test_a_turn_ends_even_when_its_calls_are_dropped(mock: TestClient) -> None:
    body = {"model": "gpt-5.4", "input": "Turn 4: go", "tools": [EXEC]}
    kinds = [mock.post("/v1/responses", json=body).json()["output"][-1]["type"] for _ in range(7)]
    assert kinds == ["function_call"] * 6 + ["message"]


def test_requests_without_the_agents_tools_get_the_usual_answers(mock: TestClient) -> None:
    weather = {"type": "function", "name": "get_weather", "parameters": {"type": "object"}}
    body = {"model": "gpt-5.4", "input": "Turn 1: weather?", "tools": [weather]}
    call = mock.post("/v1/responses", json=body).json()["output"][-1]
    assert (call["name"], call["arguments"]) == ("get_weather", '{"city": "Paris"}')
    plain = mock.post("/v1/responses", json={"model": "gpt-5.4", "input": "hi"}).json()["output"][-1]
    assert plain["content"][0]["text"] == "echo: hi"


def test_the_agent_reads_with_claude_codes_read_tool_keeping_its_signed_thinking(
    mock: TestClient, project: Path
) -> None:
    files = sorted(path.resolve() for path in project.rglob("*") if path.is_file())
    messages: list[dict[str, Any]] = [{"role": "user", "content": [{"type": "text", "text": "Turn 2: read"}]}]
    read = []
    for _ in range(10):
        body = {
            "model": "claude-sonnet-4-5",
            "max_tokens": 4096,
            "messages": messages,
            "tools": [READ],
            "thinking": {"type": "enabled", "budget_tokens": 1024},
        }
        response = mock.post("/v1/messages", json=body, headers=ANTHROPIC)
        assert response.status_code == 200, response.text
        reply = response.json()
        thinking = reply["content"][0]
        assert thinking["signature"] == signature_for("claude-sonnet-4-5", thinking["thinking"])
        messages.append({"role": "assistant", "content": reply["content"]})
        if reply["stop_reason"] == "end_turn":
            break
        use = reply["content"][-1]
        read.append(use["input"]["file_path"])
        content = Path(use["input"]["file_path"]).read_text()
        messages.append(
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": use["id"], "content": content}],
            }
        )
    assert read == [str(files[2]), str(files[3])]
    assert reply["content"][-1]["text"].endswith("showed the facts of 2 of these 2 files.")


def test_the_project_is_seeded_and_every_file_is_within_its_size(tmp_path: Path) -> None:
    first = write_project(tmp_path / "a", files=3, seed=5, min_tokens=300, max_tokens=600)
    again = write_project(tmp_path / "b", files=3, seed=5, min_tokens=300, max_tokens=600)
    assert [path.read_text() for path, _ in first] == [path.read_text() for path, _ in again]
    for path, tokens in first:
        assert 300 <= tokens <= 700  # the last line and the fact line may run past the target
        lines = path.read_text().splitlines()
        facts = [number for number, line in enumerate(lines) if line.startswith(f"FACT {path.name}: ")]
        assert len(facts) == 1 and 0 < facts[0] < len(lines) - 1
