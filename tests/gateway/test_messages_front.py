"""``MessagesFront``: the checks of a body, and a Claude Code-like conversation compacted and excerpted by
the gateway's own transforms (real compressors, a real Redis, the cheap model played by respx) through the
adapter, groups kept whole, kept messages the original objects, the summary marked for the cache."""

from __future__ import annotations

from typing import Any

import httpx
import orjson
import pytest
import redis.asyncio as aioredis
import respx

from gateway.base.errors import InvalidRequest
from gateway.base.record import RequestRecord
from gateway.config.runtime import build_runtime
from gateway.config.schema.root import GatewayConfig
from gateway.core.planning import latest_instruction
from gateway.core.transforms import CompressorTransforms
from gateway.fronts.messages.breakpoints import EPHEMERAL, count
from gateway.fronts.messages.front import MESSAGES, check_messages
from gateway.fronts.messages.groups import tool_pairs
from gateway.upstream.clients import UpstreamPool
from policies import Action, Facts
from policies.actions.compress import is_client_compaction
from policies.schema import DEFAULT_CLIENT_COMPACTION
from tests.factories import UPSTREAM, completion, make_config, shared_counter
from tests.fixtures.haystack import ProseGenerator

MODEL = "claude-sonnet-4-5"
SIGNATURE = "EqQBCkYIBxgCKkBdyn1rO0c7+X0rJ6k3k1L9QeTgVZmY4vPnV3kqN+3L2s4=="
SUMMARY = (
    "## User goal\nFix the build.\n## Confirmed conclusions\n- The parser is fixed.\n## Open todos\n- Tests."
)
CONTROL = {"type": "ephemeral"}


def body(**overrides: Any) -> dict[str, Any]:
    found: dict[str, Any] = {
        "model": MODEL,
        "max_tokens": 1024,
        "messages": [{"role": "user", "content": "hi"}],
    }
    found.update(overrides)
    return found


@pytest.mark.parametrize(
    ("overrides", "param"),
    [
        ({"model": None}, "model"),
        ({"max_tokens": None}, "max_tokens"),
        ({"max_tokens": 0}, "max_tokens"),
        ({"max_tokens": True}, "max_tokens"),
        ({"max_tokens": "10"}, "max_tokens"),
        ({"messages": None}, "messages"),
        ({"messages": []}, "messages"),
        ({"messages": "hi"}, "messages"),
        ({"messages": ["hi"]}, "messages.0"),
        ({"messages": [{"role": "system", "content": "x"}]}, "messages.0.role"),
        ({"messages": [{"role": "user"}]}, "messages.0.content"),
        ({"messages": [{"role": "user", "content": [{"text": "no type"}]}]}, "messages.0.content.0"),
        ({"system": [{"type": "image"}]}, "system"),
        ({"system": 3}, "system"),
        ({"tools": {"name": "f"}}, "tools"),
        ({"tool_choice": "auto"}, "tool_choice"),
        ({"thinking": True}, "thinking"),
        ({"stream": "yes"}, "stream"),
    ],
)
def test_check_messages_refuses_what_the_gateway_cannot_read(overrides: dict[str, Any], param: str) -> None:
    raw = body(**overrides)
    if overrides.get("model", "") is None:
        del raw["model"]
    if overrides.get("max_tokens", "") is None:
        del raw["max_tokens"]
    if overrides.get("messages", "") is None:
        del raw["messages"]
    with pytest.raises(InvalidRequest) as caught:
        check_messages(raw)
    assert caught.value.param == param


def test_check_messages_returns_the_model_of_a_valid_body() -> None:
    valid = body(
        system=[{"type": "text", "text": "Be brief.", "cache_control": CONTROL}],
        tools=[{"name": "f", "input_schema": {"type": "object"}}],
        tool_choice={"type": "auto"},
        thinking={"type": "enabled", "budget_tokens": 2048},
        stream=True,
        messages=[
            {"role": "user", "content": [{"type": "text", "text": "hi"}]},
            {"role": "assistant", "content": "hello"},
        ],
    )
    assert check_messages(valid) == MODEL
    counting = body()
    del counting["max_tokens"]
    assert check_messages(counting, require_max_tokens=False) == MODEL


def test_front_counts_estimates_and_rebuilds_the_same_body() -> None:
    request = body(system="Be brief.")
    count_ = MESSAGES.count(shared_counter(), MODEL, request)
    assert MESSAGES.approximate and count_.approximate
    assert count_.total <= MESSAGES.upper_bound(shared_counter(), MODEL, request, len(orjson.dumps(request)))
    rebuilt = MESSAGES.rebuild(request, MESSAGES.messages(request))
    assert rebuilt == request and rebuilt["messages"][0] is request["messages"][0]


def test_front_shows_claude_codes_own_summary_request_as_the_latest_instruction() -> None:
    """Claude Code compacts by asking its model for a summary: the gateway must see that request (a client
    compaction turn, forwarded under the cliff), also after the results of a tool call."""
    request = agent_session(2)
    ask = (
        "Your task is to create a detailed summary of the conversation so far, paying close attention to "
        "the user's explicit requests and your previous actions."
    )
    results = request["messages"][-3]  # the results of the last tool call, then a reminder
    assert results["content"][0]["type"] == "tool_result"
    results["content"].append({"type": "text", "text": ask})
    instruction = latest_instruction(MESSAGES.messages({**request, "messages": request["messages"][:-2]}))
    assert instruction is not None and is_client_compaction(instruction, DEFAULT_CLIENT_COMPACTION)
    plain = latest_instruction(MESSAGES.messages(request))
    assert plain == "Which files are left?" and not is_client_compaction(plain, DEFAULT_CLIENT_COMPACTION)


# --- through the transforms ----------------------------------------------------------------------


def agent_session(steps: int) -> dict[str, Any]:
    """A coding agent's session: a task, then steps of thinking, a tool call (two in parallel every third
    step) and their large results (with a reminder after them), the assistant's reading; then a question.
    Breakpoints where Claude Code puts them: the system prompt and the last message."""
    prose = ProseGenerator(31)
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Fix the build, then run the tests."}]
    for step in range(1, steps + 1):
        ids = [f"toolu_{step}_{n}" for n in range(2 if step % 3 == 0 else 1)]
        thinking = {"type": "thinking", "thinking": prose.sentence(), "signature": SIGNATURE}
        uses = [
            {"type": "tool_use", "id": i, "name": "Read", "input": {"file_path": f"/src/m{step}.py"}}
            for i in ids
        ]
        messages.append({"role": "assistant", "content": [thinking, *uses]})
        results: list[dict[str, Any]] = [
            {
                "type": "tool_result",
                "tool_use_id": i,
                "content": " ".join(prose.sentence() for _ in range(60)),
            }
            for i in ids
        ]
        results.append({"type": "text", "text": f"<system-reminder>step {step}</system-reminder>"})
        messages.append({"role": "user", "content": results})
        messages.append({"role": "assistant", "content": [{"type": "text", "text": prose.sentence()}]})
        messages.append({"role": "user", "content": [{"type": "text", "text": f"Next, step {step + 1}."}]})
    messages[-1] = {
        "role": "user",
        "content": [{"type": "text", "text": "Which files are left?", "cache_control": CONTROL}],
    }
    return {
        "model": MODEL,
        "max_tokens": 4096,
        "system": [{"type": "text", "text": "You are a coding agent.", "cache_control": CONTROL}],
        "tools": [{"name": "Read", "description": "Read a file.", "input_schema": {"type": "object"}}],
        "messages": messages,
    }


def front_config() -> dict[str, Any]:
    config = make_config()
    config["providers"]["anthropic"] = {"base_url": "http://anthropic.test/v1", "kind": "anthropic"}
    config["models"][MODEL] = {"provider": "anthropic", "context_window": 200_000}
    config["policies"] = {
        "bands": {"claude-*": {"warning_tokens": 20_000, "cliff_tokens": 40_000}},
        "default": {
            "name": "default",
            "compress": {"cheap_model": "small", "timing": "eager", "keep_recent_turns": 1},
        },
    }
    return config


def transforms_for(redis: aioredis.Redis, router: respx.Router) -> tuple[Any, CompressorTransforms]:
    runtime = build_runtime(GatewayConfig.model_validate(front_config()), counter=shared_counter())
    pool = UpstreamPool(
        lambda provider: httpx.AsyncClient(transport=httpx.MockTransport(router.async_handler))
    )
    transforms = CompressorTransforms(
        runtime=runtime,
        pool=pool,
        redis=redis,
        record=RequestRecord(request_id="r", endpoint="messages"),
        retrievers={},
    )
    return runtime, transforms


def assert_pairs_whole(messages: list[dict[str, Any]]) -> None:
    """Every tool_use is answered in the next message, whose results come first; every result answers
    a tool_use of the message before it."""
    pairs = {pair.call: pair for pair in tool_pairs(messages)}
    for index, message in enumerate(messages):
        blocks = message["content"] if isinstance(message["content"], list) else []
        uses = [b for b in blocks if b.get("type") == "tool_use"]
        results = [n for n, b in enumerate(blocks) if b.get("type") == "tool_result"]
        if uses:
            assert index in pairs and len(pairs[index].uses) == len(uses), index
        if results:
            assert results == list(range(len(results))), index
            assert index - 1 in pairs and list(pairs[index - 1].results) == results, index


@pytest.mark.anyio
async def test_front_compaction_keeps_groups_whole_and_marks_the_summary_for_the_cache(
    redis_client: aioredis.Redis, tenant_name: str
) -> None:
    router = respx.Router(assert_all_called=False)
    cheap = router.post(f"{UPSTREAM}/chat/completions").mock(
        return_value=httpx.Response(200, json=completion(SUMMARY, model="gpt-5.4-mini"))
    )
    runtime, transforms = transforms_for(redis_client, router)
    request = agent_session(14)
    tokens = MESSAGES.count(runtime.counter, MODEL, request).total
    assert 20_000 < tokens < 40_000
    facts = Facts(tenant=tenant_name, model=MODEL, prompt_tokens=tokens)
    decision = runtime.engine.decide(facts)
    assert decision.transforms and decision.transforms[0] is Action.COMPRESS
    compressed = await transforms.run(Action.COMPRESS, MESSAGES.messages(request), decision, facts)
    rebuilt = MESSAGES.rebuild(request, compressed)
    assert cheap.called
    sent = rebuilt["messages"]
    summary = sent[0]
    assert summary["role"] == "user" and summary["content"][-1]["cache_control"] == EPHEMERAL
    assert summary["content"][0]["text"].startswith("[Summary of the earlier conversation")
    assert SUMMARY in summary["content"][0]["text"]
    originals = {id(message) for message in request["messages"]}
    kept = [message for message in sent[1:] if id(message) in originals]
    assert kept and kept[-1] is request["messages"][-1]
    assert len(sent) < len(request["messages"])
    for message in sent[1:]:
        if id(message) not in originals:  # only a message cut to its kept blocks, or an excerpt
            assert any(
                orjson.dumps(block) in orjson.dumps(request["messages"]) for block in message["content"]
            )
    assert_pairs_whole(sent)
    for message in sent:
        for block in message["content"] if isinstance(message["content"], list) else ():
            if block.get("type") == "thinking":
                assert block["signature"] == SIGNATURE and message in request["messages"]
    assert count(rebuilt) <= 4 and rebuilt["system"] is request["system"]
    assert MESSAGES.count(runtime.counter, MODEL, rebuilt).total < tokens


@pytest.mark.anyio
async def test_front_retrieval_excerpts_a_document_in_a_copy_of_its_message(
    redis_client: aioredis.Redis, tenant_name: str
) -> None:
    router = respx.Router(assert_all_called=False)
    runtime, transforms = transforms_for(redis_client, router)
    prose = ProseGenerator(5)
    paragraphs = [" ".join(prose.sentence() for _ in range(6)) for _ in range(900)]
    paragraphs[700] = "The vault code is 7731-KILO."
    document = {"type": "text", "text": "\n\n".join(paragraphs)}
    question = {"type": "text", "text": "What is the vault code?", "cache_control": CONTROL}
    request = body(
        system=[{"type": "text", "text": "Answer from the document."}],
        messages=[{"role": "user", "content": [document, question]}],
    )
    tokens = MESSAGES.count(runtime.counter, MODEL, request).total
    facts = Facts(tenant=tenant_name, model=MODEL, prompt_tokens=tokens)
    decision = runtime.engine.decide(facts)
    cut = await transforms.run(Action.RETRIEVE, MESSAGES.messages(request), decision, facts)
    rebuilt = MESSAGES.rebuild(request, cut)
    content = rebuilt["messages"][0]["content"]
    assert content[1] is question
    assert "7731-KILO" in content[0]["text"] and len(content[0]["text"]) < len(document["text"])
    assert request["messages"][0]["content"][0] is document
    assert MESSAGES.count(runtime.counter, MODEL, rebuilt).total <= decision.retrieve.budget_tokens
