"""Compaction that keeps the provider's cache warm and keeps what matters, end to end: the openai SDK sends
growing sessions through a gateway with small bands to the caching mock upstream, and the tests read what
the upstream received.

- a tool loop is compacted once, and its compacted prefix is then sent byte for byte, turn after turn,
  never alternating with excerpts;
- a long chat's compacted requests carry the user's early instructions verbatim, and the recalled
  passage of an old paste, right before the latest question, when that question asks about it;
- a client's own compaction turn is forwarded unchanged under the cliff.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import orjson
import pytest

from tests.e2e.processes import gateway_process
from tests.factories import TENANT_KEY, make_config, write_config
from tests.fixtures.haystack import ProseGenerator

WARNING, CLIFF = 6_000, 9_000


def compaction_config(mock_url: str, tenant: str) -> dict[str, Any]:
    config = make_config(tenants={tenant: {"keys": [TENANT_KEY]}})
    config["providers"]["mock"]["base_url"] = f"{mock_url}/v1"
    config["models"]["small"]["pricing"] = {"input": "0.25", "cached_input": "0.025", "output": "2.00"}
    config["limits"] = {"track_conversations_from": 1024}
    config["policies"] = {
        "bands": {"gpt-5.4": {"warning_tokens": WARNING, "cliff_tokens": CLIFF}},
        "default": {
            "name": "default",
            "compress": {
                "cheap_model": "small",
                "target_tokens": 4_000,
                "keep_recent_tokens": 1_200,
                "pinned_tokens": 600,
                "pin_max_tokens": 120,
                "recall_tokens": 900,
            },
            "retrieve": {"document_min_tokens": 800, "chunk_tokens_min": 100, "chunk_tokens_max": 200},
        },
    }
    return config


@pytest.fixture(scope="module")
def compaction_gateway(
    tmp_path_factory: pytest.TempPathFactory, mock_url: str, redis_url: str
) -> Iterator[tuple[str, str]]:
    tenant = f"compaction-{int(time.time() * 1000)}"
    directory = tmp_path_factory.mktemp("compaction")
    path = write_config(directory / "gateway.yaml", compaction_config(mock_url, tenant))
    with gateway_process(path, redis_url, directory) as url:
        yield url, tenant


def main_requests(mock: httpx.Client) -> list[dict[str, Any]]:
    seen = mock.get("/_requests").json()["requests"]
    return [
        r["body"] for r in seen if r["path"] == "/v1/chat/completions" and r["body"]["model"] == "gpt-5.4"
    ]


def words(prose: ProseGenerator, sentences: int) -> str:
    return " ".join(prose.sentence() for _ in range(sentences))


def is_summary(message: dict[str, Any]) -> bool:
    return "Summary of the earlier conversation" in str(message.get("content"))


def is_recall(message: dict[str, Any]) -> bool:
    return str(message.get("content")).startswith("[Excerpts recalled by the gateway")


def test_a_tool_loop_is_compacted_once_and_its_prefix_reused_byte_for_byte(
    compaction_gateway: tuple[str, str], mock: httpx.Client
) -> None:
    gateway, _ = compaction_gateway
    client = openai.OpenAI(base_url=f"{gateway}/v1", api_key=TENANT_KEY, max_retries=0)
    prose = ProseGenerator(21)
    tools = [{"type": "function", "function": {"name": "read_file", "parameters": {"type": "object"}}}]
    history: list[Any] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Find why the build fails."},
    ]
    actions = []
    for step in range(16):
        call = {"id": f"c{step}", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}
        history.append({"role": "assistant", "content": None, "tool_calls": [call]})
        history.append({"role": "tool", "tool_call_id": f"c{step}", "content": words(prose, 40)})
        raw = client.chat.completions.with_raw_response.create(model="gpt-5.4", messages=history, tools=tools)
        actions.append(raw.headers["x-gateway-action"])
    compressed = [n for n, action in enumerate(actions) if action == "compress"]
    assert compressed and "retrieve" not in actions  # no flip-flop between a summary and excerpts
    assert actions[compressed[0] :] == ["compress"] * (len(actions) - compressed[0])
    sent = [body["messages"] for body in main_requests(mock)[compressed[0] :]]
    reused = 0
    for before, after in itertools.pairwise(sent):
        recalls = [n for n, message in enumerate(before) if is_recall(message)]
        stable = before[: recalls[0]] if recalls else before  # the recall and what follows: this turn's
        assert not is_recall(before[-1])
        summaries = [n for n, message in enumerate(before) if is_summary(message)]
        if sum(map(is_summary, after)) == len(summaries):
            assert orjson.dumps(after[: len(stable)]) == orjson.dumps(stable)  # byte for byte, appended to
            reused += 1
        else:  # a new part is appended after the earlier ones, which stay as they were
            assert orjson.dumps(after[: summaries[-1] + 1]) == orjson.dumps(before[: summaries[-1] + 1])
    assert reused >= 2


def test_a_long_chat_keeps_the_users_words_and_recalls_an_old_paste_when_asked(
    compaction_gateway: tuple[str, str], mock: httpx.Client
) -> None:
    gateway, _ = compaction_gateway
    client = openai.OpenAI(base_url=f"{gateway}/v1", api_key=TENANT_KEY, max_retries=0)
    prose = ProseGenerator(22)
    instruction = "Always answer in metric units. The project code is ZEBRA-4471."
    log = words(prose, 30) + " The staging database password is TULIP-9931. " + words(prose, 30)
    turns = [instruction, "Here is last night's deployment log:\n" + log]
    turns += [words(prose, 12) for _ in range(30)]
    turns.append("What was the staging database password in that log?")
    history: list[Any] = [{"role": "system", "content": "You are a careful analyst."}]
    for text in turns:
        history.append({"role": "user", "content": text})
        raw = client.chat.completions.with_raw_response.create(model="gpt-5.4", messages=history)
        history.append({"role": "assistant", "content": words(prose, 3)})
        assert raw.headers["x-gateway-action"] in ("forward", "compress")
    compacted = [body["messages"] for body in main_requests(mock) if any(map(is_summary, body["messages"]))]
    assert compacted
    assert all(instruction in str(messages) for messages in compacted)  # pinned, verbatim
    asked = compacted[-1]
    assert "TULIP-9931" in str(asked[-2]["content"]) and is_recall(asked[-2])  # recalled, before the question
    assert asked[-1]["content"] == turns[-1]


def test_a_clients_own_compaction_turn_is_forwarded_unchanged_under_the_cliff(
    compaction_gateway: tuple[str, str], mock: httpx.Client
) -> None:
    gateway, _ = compaction_gateway
    client = openai.OpenAI(base_url=f"{gateway}/v1", api_key=TENANT_KEY, max_retries=0)
    prose = ProseGenerator(23)
    history: list[Any] = [{"role": "system", "content": "You are a coding agent."}]
    for _ in range(34):
        history += [{"role": "user", "content": words(prose, 10)}, {"role": "assistant", "content": "ok"}]
    history.append(
        {
            "role": "user",
            "content": "You are performing a CONTEXT CHECKPOINT COMPACTION. Create a handoff summary for "
            "another model that will resume the task.",
        }
    )
    raw = client.chat.completions.with_raw_response.create(model="gpt-5.4", messages=history)
    prompt = int(raw.headers["x-gateway-prompt-tokens"])
    assert WARNING <= prompt <= CLIFF, prompt
    assert raw.headers["x-gateway-action"] == "forward"
    assert "client compaction" in raw.headers["x-gateway-reason"]
    assert main_requests(mock)[-1]["messages"] == history
