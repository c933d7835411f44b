"""A compacted tool loop with a recall, on each front (chat, Responses, Messages), through the gateway's own
transforms (real compressors, a real Redis, the cheap model played by respx) and the front's adapter: the
request still ends on the client's own newest step, the recall sits between the summary and that step,
and it reads as the gateway's reference material, not as something the user said."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx
import orjson
import pytest
import redis.asyncio as aioredis
import respx

from gateway.base.record import RequestRecord
from gateway.config.runtime import Runtime, build_runtime
from gateway.config.schema.root import GatewayConfig
from gateway.core.front import CHAT, Front
from gateway.core.transforms import CompressorTransforms
from gateway.fronts.messages.breakpoints import EPHEMERAL, count
from gateway.fronts.messages.front import MESSAGES
from gateway.fronts.responses.front import RESPONSES
from gateway.upstream.clients import UpstreamPool
from policies import Action, Decision, Facts
from tests.factories import UPSTREAM, completion, make_config, shared_counter
from tests.fixtures.haystack import ProseGenerator
from tests.gateway.test_messages_front import SIGNATURE, assert_pairs_whole

SUMMARY = "## User goal\nDeploy.\n## Confirmed conclusions\n- Files read.\n## Open todos\n- Deploy."
FACT = "The staging vault password is ZEBRA-7731."
QUERY = {"query": "staging vault password"}
TASK = "Deploy the service to staging."
STEPS = 16


def outputs() -> list[str]:
    prose = ProseGenerator(41)
    found = [" ".join(prose.sentence() for _ in range(70)) for _ in range(STEPS)]
    found[2] = f"{found[2]} {FACT} {' '.join(prose.sentence() for _ in range(10))}"
    return found


def arguments(step: int) -> dict[str, Any]:
    return QUERY if step == STEPS - 1 else {"path": f"/src/m{step}.py"}


def chat_body() -> dict[str, Any]:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a deploying agent."},
        {"role": "user", "content": TASK},
    ]
    for step, output in enumerate(outputs()):
        call = {
            "id": f"call_{step}",
            "type": "function",
            "function": {"name": "lookup", "arguments": orjson.dumps(arguments(step)).decode()},
        }
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"call_{step}", "content": output})
    return {"model": "gpt-5.4", "messages": messages}


def responses_body() -> dict[str, Any]:
    items: list[dict[str, Any]] = [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": TASK}]}
    ]
    for step, output in enumerate(outputs()):
        items.append({"type": "reasoning", "id": f"rs_{step}", "summary": [], "encrypted_content": "e"})
        items.append(
            {
                "type": "function_call",
                "id": f"fc_{step}",
                "call_id": f"call_{step}",
                "name": "lookup",
                "arguments": orjson.dumps(arguments(step)).decode(),
            }
        )
        items.append({"type": "function_call_output", "call_id": f"call_{step}", "output": output})
    return {"model": "gpt-5.4", "instructions": "You are a deploying agent.", "input": items}


def messages_body() -> dict[str, Any]:
    """Claude Code's shape: thinking before each call, text after each result in the same message."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": TASK}]
    for step, output in enumerate(outputs()):
        thinking = {"type": "thinking", "thinking": f"step {step}", "signature": SIGNATURE}
        use = {"type": "tool_use", "id": f"toolu_{step}", "name": "lookup", "input": arguments(step)}
        messages.append({"role": "assistant", "content": [thinking, use]})
        result = {"type": "tool_result", "tool_use_id": f"toolu_{step}", "content": output}
        said = f"<system-reminder>step {step}</system-reminder>"
        if step == STEPS - 1:  # the user's words typed while the tool ran, sent with its result
            said = "Use the staging vault password from before."
        messages.append({"role": "user", "content": [result, {"type": "text", "text": said}]})
    messages[-1]["content"][-1]["cache_control"] = {"type": "ephemeral"}  # where Claude Code puts them
    return {
        "model": "claude-sonnet-4-5",
        "max_tokens": 4096,
        "system": [
            {"type": "text", "text": "You are a deploying agent.", "cache_control": {"type": "ephemeral"}}
        ],
        "messages": messages,
    }


def config() -> dict[str, Any]:
    found = make_config()
    found["providers"]["anthropic"] = {"base_url": "http://anthropic.test/v1", "kind": "anthropic"}
    found["models"]["claude-sonnet-4-5"] = {"provider": "anthropic", "context_window": 200_000}
    band = {"warning_tokens": 20_000, "cliff_tokens": 40_000}
    found["policies"] = {
        "bands": {"claude-*": band, "gpt-5.4": band},
        "default": {
            "name": "default",
            "compress": {
                "cheap_model": "small",
                "timing": "eager",
                "keep_recent_turns": 0,
                "keep_recent_tokens": 3_000,
                "recall_tokens": 1_500,
                "recall_on_tool_steps": True,  # the loop's newest step is a lookup of an old fact
            },
        },
    }
    return found


def texts(entry: dict[str, Any]) -> str:
    """The text of a message or a Responses message item."""
    content = entry.get("content")
    if isinstance(content, str):
        return content
    parts = content if isinstance(content, list) else []
    return "\n".join(str(part.get("text", "")) for part in parts if isinstance(part, dict))


def is_recall(entry: dict[str, Any]) -> bool:
    return texts(entry).startswith("[Excerpts recalled by the gateway")


def is_summary(entry: dict[str, Any]) -> bool:
    return texts(entry).startswith("[Summary of the earlier conversation")


def is_newest_call(entry: dict[str, Any]) -> bool:
    """The assistant message or item that makes the loop's last call (the one looking for the fact)."""
    if entry.get("type") == "function_call":
        return entry["call_id"] == f"call_{STEPS - 1}"
    if entry.get("role") != "assistant":
        return False
    calls = [call["id"] for call in entry.get("tool_calls") or ()]
    blocks = (
        [block.get("id") for block in entry["content"] if isinstance(block, dict)]
        if isinstance(entry.get("content"), list)
        else []
    )
    return f"call_{STEPS - 1}" in calls or f"toolu_{STEPS - 1}" in blocks


FRONTS: dict[str, tuple[Front, Any, str]] = {
    "chat": (CHAT, chat_body, "messages"),
    "responses": (RESPONSES, responses_body, "input"),
    "messages": (MESSAGES, messages_body, "messages"),
}


@dataclass(frozen=True)
class Compressed:
    runtime: Runtime
    tokens: int
    """The request's count as received."""
    decision: Decision
    messages: list[Any]
    """The front's messages as the compress transform left them."""


async def compressed_through(
    name: str, body: dict[str, Any], settings: dict[str, Any], redis: aioredis.Redis, tenant: str
) -> Compressed:
    """``body`` through the gateway's compress transform (real compressors and Redis, the cheap model played
    by respx), as the front ``name`` shows it to the compressors."""
    front = FRONTS[name][0]
    router = respx.Router(assert_all_called=False)
    router.post(f"{UPSTREAM}/chat/completions").mock(
        return_value=httpx.Response(200, json=completion(SUMMARY, model="gpt-5.4-mini"))
    )
    runtime = build_runtime(GatewayConfig.model_validate(settings), counter=shared_counter())
    pool = UpstreamPool(lambda _: httpx.AsyncClient(transport=httpx.MockTransport(router.async_handler)))
    transforms = CompressorTransforms(
        runtime=runtime,
        pool=pool,
        redis=redis,
        record=RequestRecord(request_id="r", endpoint=name),
        retrievers={},
    )
    tokens = front.count(runtime.counter, body["model"], body).total
    facts = Facts(tenant=tenant, model=body["model"], prompt_tokens=tokens)
    decision = runtime.engine.decide(facts)
    messages = await transforms.run(Action.COMPRESS, front.messages(body), decision, facts)
    return Compressed(runtime, tokens, decision, messages)


@pytest.mark.anyio
@pytest.mark.parametrize("name", list(FRONTS))
async def test_a_compacted_tool_loop_ends_on_the_clients_newest_step_with_the_recall_before_it(
    name: str, redis_client: aioredis.Redis, tenant_name: str
) -> None:
    front, make_body, field = FRONTS[name]
    body = make_body()
    done = await compressed_through(name, body, config(), redis_client, tenant_name)
    assert 20_000 < done.tokens < 40_000
    assert done.decision.transforms and done.decision.transforms[0] is Action.COMPRESS
    compressed = done.messages
    sent: list[dict[str, Any]] = front.rebuild(body, compressed)[field]

    assert sent[-1] == body[field][-1]  # the client's newest output, last, as it sent it
    [summary] = [n for n, entry in enumerate(sent) if is_summary(entry)]
    [recall] = [n for n, entry in enumerate(sent) if is_recall(entry)]
    [newest] = [n for n, entry in enumerate(sent) if is_newest_call(entry)]
    assert summary < recall < newest < len(sent) - 1
    assert FACT in texts(sent[recall]) and FACT not in str(sent[:recall])
    assert "not a message from the user" in texts(sent[recall])
    assert sent[recall]["role"] == "user"  # the least authority: it quotes old tool outputs
    if front is MESSAGES:
        assert_pairs_whole(sent)
        rebuilt = front.rebuild(body, compressed)
        assert count(rebuilt) <= 4
        assert sent[summary]["content"][-1]["cache_control"] == EPHEMERAL
        # the next request shares the prefix up to the message before the recall: cached there too
        assert sent[recall - 1]["content"][-1]["cache_control"] == EPHEMERAL
        assert sent[-1]["content"][-1]["cache_control"] == EPHEMERAL  # the client's own, kept
        assert sent[recall - 1]["role"] == "user"  # merged with the results before it: no turn of its own


@pytest.mark.anyio
@pytest.mark.parametrize("name", list(FRONTS))
async def test_tool_outputs_the_compressor_excerpts_are_excerpted_in_what_each_front_sends(
    name: str, redis_client: aioredis.Redis, tenant_name: str
) -> None:
    """Outputs kept verbatim but over the cap are cut to head and tail; the cut must survive the front's
    adapter (Responses items, Anthropic blocks), not come back whole as the client sent them."""
    front, make_body, field = FRONTS[name]
    settings = config()
    band = {"warning_tokens": 34_000, "cliff_tokens": 68_000}  # a target of 10,200 tokens
    settings["policies"]["bands"] = {"claude-*": band, "gpt-5.4": band}
    settings["policies"]["default"]["compress"].update(
        {"keep_recent_tokens": 14_000, "keep_recent_max_tokens": 3_000, "recall_tokens": 0}
    )
    body = lengthened(make_body(), field)
    done = await compressed_through(name, body, settings, redis_client, tenant_name)
    runtime, tokens, compressed = done.runtime, done.tokens, done.messages
    rebuilt = front.rebuild(body, compressed)
    sent: list[dict[str, Any]] = rebuilt[field]
    assert "tokens of this tool output left out by the gateway" in orjson.dumps(sent).decode()
    assert sent[-1] == body[field][-1]  # the output the model answers: whole
    counted = front.count(runtime.counter, body["model"], rebuilt).total
    assert counted <= runtime.counter.count_messages(body["model"], compressed) + 200 < tokens


def lengthened(body: dict[str, Any], field: str) -> dict[str, Any]:
    """``body`` with its last two tool outputs four times as long (long enough to be cut to head and tail)."""
    entries = [dict(entry) for entry in body[field]]
    found = 0
    for entry in reversed(entries):
        if found == 2:
            break
        if entry.get("role") == "tool" or entry.get("type") == "function_call_output":
            key = "content" if "content" in entry else "output"
            entry[key] = " ".join([entry[key]] * 4)
            found += 1
        elif isinstance(entry.get("content"), list) and entry["content"][0].get("type") == "tool_result":
            result = dict(entry["content"][0])
            result["content"] = " ".join([result["content"]] * 4)
            entry["content"] = [result, *entry["content"][1:]]
            found += 1
    return {**body, field: entries}


@pytest.mark.anyio
@pytest.mark.parametrize("name", list(FRONTS))
async def test_by_default_a_loop_reading_tool_outputs_gets_no_recall(
    name: str, redis_client: aioredis.Redis, tenant_name: str
) -> None:
    """``recall_on_tool_steps`` is off in the shipped policies: while the model reads the outputs of its
    newest call, no recall sits before them (the next request would send that step again uncached)."""
    front, make_body, field = FRONTS[name]
    settings = config()
    del settings["policies"]["default"]["compress"]["recall_on_tool_steps"]
    body = make_body()
    done = await compressed_through(name, body, settings, redis_client, tenant_name)
    sent: list[dict[str, Any]] = front.rebuild(body, done.messages)[field]
    assert any(is_summary(entry) for entry in sent)
    assert not any(is_recall(entry) for entry in sent)
    assert sent[-1] == body[field][-1]
