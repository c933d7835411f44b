"""``POST /v1/responses`` through the app, the upstream mocked by respx: forwarding, streaming, the
compression of a long agentic history, and ``previous_response_id`` chains."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import redis
import respx
from starlette.testclient import WebSocketDenialResponse

from gateway.fronts.responses.counting import count_responses
from gateway.fronts.responses.items import call_id_of, groups, kind_of
from gateway.fronts.responses.memory import response_key
from tests.factories import TENANT_KEY, UPSTREAM, completion, gateway_client, make_config, shared_counter
from tests.fixtures.haystack import ProseGenerator
from tests.mock.responses import ENCRYPTED, response_events, responses_answer, sse

SUMMARY = "## User goal\nShip it.\n## Confirmed conclusions\n- Files listed.\n## Open todos\n- Deploy."
OTHER = "http://other.test/v1"
TOOL = {
    "type": "function",
    "name": "shell",
    "description": "Run a shell command.",
    "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]},
}


class Upstream:
    """Answers ``/responses`` (echo-like, with ``usage`` overridable per call) and the cheap model's chat
    calls; remembers what each received."""

    def __init__(self) -> None:
        self.main: list[bytes] = []
        self.summaries = 0
        self.usage: list[tuple[int, int]] = []

    def responses(self, request: httpx.Request) -> httpx.Response:
        self.main.append(request.content)
        body = orjson.loads(request.content)
        answer = responses_answer(body, number=len(self.main))
        if self.usage:
            used_in, used_out = self.usage.pop(0)
            answer["usage"] = {
                "input_tokens": used_in,
                "output_tokens": used_out,
                "total_tokens": used_in + used_out,
            }
        if not body.get("stream"):
            return httpx.Response(200, json=answer)
        payload = sse(response_events(answer))

        async def pieces() -> AsyncIterator[bytes]:
            for start in range(0, len(payload), 97):
                yield payload[start : start + 97]

        return httpx.Response(200, content=pieces(), headers={"content-type": "text/event-stream"})

    def chat(self, request: httpx.Request) -> httpx.Response:
        self.summaries += 1
        return httpx.Response(
            200, json=completion(SUMMARY, usage={"prompt_tokens": 900, "completion_tokens": 40})
        )


@pytest.fixture
def upstream() -> tuple[respx.Router, Upstream]:
    router = respx.Router(assert_all_called=False)
    answer = Upstream()
    router.post(f"{UPSTREAM}/responses").mock(side_effect=answer.responses)
    router.post(f"{UPSTREAM}/chat/completions").mock(side_effect=answer.chat)
    return router, answer


def user(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def agent_history(tokens: int, *, seed: int = 5) -> list[dict[str, Any]]:
    """A coding agent's session of at least ``tokens`` tokens: every step a user message, reasoning, a
    call and its long output, reasoning again and an answer; reasoning at every boundary."""
    prose = ProseGenerator(seed)

    def text(words: int) -> str:
        out = ""
        while len(out.split()) < words:
            out += prose.sentence() + " "
        return out.strip()

    items: list[dict[str, Any]] = []
    step = 0
    while True:
        for _ in range(10):
            step += 1
            items += [
                user(f"Step {step}: {text(25)}"),
                {
                    "type": "reasoning",
                    "id": f"rs_{step}a",
                    "summary": [{"type": "summary_text", "text": text(12)}],
                    "encrypted_content": ENCRYPTED,
                },
                {
                    "type": "function_call",
                    "id": f"fc_{step}",
                    "call_id": f"call_{step}",
                    "name": "shell",
                    "arguments": orjson.dumps({"cmd": f"cat part{step}.txt"}).decode(),
                },
                {"type": "function_call_output", "call_id": f"call_{step}", "output": text(1100)},
                {"type": "reasoning", "id": f"rs_{step}b", "summary": [], "encrypted_content": ENCRYPTED},
                {
                    "type": "message",
                    "role": "assistant",
                    "id": f"msg_{step}",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": text(40), "annotations": []}],
                },
            ]
        if count_responses(shared_counter(), "gpt-5.4", {"input": items}).total >= tokens:
            return [*items, user("What should we do next?")]


def agent_body(items: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {
        "model": "gpt-5.4",
        "instructions": "You are a coding agent.",
        "input": items,
        "tools": [TOOL],
        "store": False,
        "include": ["reasoning.encrypted_content"],
        "prompt_cache_key": "session-1",
        "reasoning": {"effort": "medium"},
        **extra,
    }


def assert_groups_intact(sent: list[dict[str, Any]], original: list[dict[str, Any]]) -> None:
    """Every original item in ``sent`` is whole groups of the original, in order and contiguous."""
    kept = [item for item in sent if not _is_summary(item)]
    assert all(item in original for item in kept)
    for group in groups(original):
        members = [original[i] for i in group]
        found = [n for n, item in enumerate(sent) if any(item == member for member in members)]
        assert found == [] or len(found) == len(members), f"group {list(group)} split"
        if found:
            assert found == list(range(found[0], found[0] + len(members)))
    for item in sent:
        if kind_of(item) == "reasoning":
            assert item["encrypted_content"] == ENCRYPTED
        if kind_of(item) == "function_call_output":
            assert any(
                call_id_of(other) == item["call_id"] and kind_of(other) == "function_call" for other in sent
            )


def _is_summary(item: dict[str, Any]) -> bool:
    content = item.get("content")
    return isinstance(content, list) and any(
        "Summary of the earlier conversation" in str(p.get("text")) for p in content
    )


def test_responses_small_request_goes_upstream_as_the_original_bytes(
    tmp_path: Path, redis_url: str, upstream: Any
) -> None:
    router, answer = upstream
    items = [
        user("list the files"),
        {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": ENCRYPTED},
        {"type": "function_call", "id": "fc_1", "call_id": "c1", "name": "shell", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "a.txt"},
        {"type": "some_future_item", "id": "x_1", "payload": {"k": [1, 2]}},
    ]
    raw = orjson.dumps(agent_body(items))
    with gateway_client(tmp_path, redis_url, router) as client:
        response = client.post("/v1/responses", content=raw, headers={"content-type": "application/json"})
    assert response.status_code == 200, response.text
    assert answer.main == [raw]
    expected = count_responses(shared_counter(), "gpt-5.4", agent_body(items)).total
    assert response.headers["x-gateway-prompt-tokens"] == str(expected)
    assert response.headers["x-gateway-action"] == "forward"
    assert response.json()["output"][-1]["content"][0]["text"] == "echo: "


def test_responses_stream_is_relayed_unchanged_and_its_usage_remembered(
    tmp_path: Path, redis_url: str, upstream: Any, tenant_name: str
) -> None:
    router, answer = upstream
    config = make_config(tenants={tenant_name: {"keys": [TENANT_KEY]}})
    answer.usage = [(1234, 56)]
    with gateway_client(tmp_path, redis_url, router, config=config) as client:
        response = client.post(
            "/v1/responses", json={"model": "gpt-5.4", "input": "stream me", "stream": True}
        )
        text = response.text
    assert response.status_code == 200
    events = [orjson.loads(line[6:]) for line in text.splitlines() if line.startswith("data: ")]
    assert events[-1]["type"] == "response.completed"
    assert (
        "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta") == "echo: stream me"
    )
    assert "[DONE]" not in text
    key = response_key(tenant_name, events[-1]["response"]["id"])
    with redis.Redis.from_url(redis_url) as sync_redis:
        assert orjson.loads(sync_redis.get(key)) == {"p": "mock", "m": "gpt-5.4", "i": 1234, "o": 56}
        assert sync_redis.ttl(key) > 0


def test_responses_history_of_260k_tokens_is_compressed_by_whole_groups(
    tmp_path: Path, redis_url: str, upstream: Any, tenant_name: str
) -> None:
    router, answer = upstream
    items = agent_history(255_000)
    body = agent_body(items)
    received = count_responses(shared_counter(), "gpt-5.4", body).total
    assert 250_000 <= received < 272_000
    config = make_config(tenants={tenant_name: {"keys": [TENANT_KEY]}})
    with gateway_client(tmp_path, redis_url, router, config=config) as client:
        first = client.post(
            "/v1/responses", content=orjson.dumps(body), headers={"content-type": "application/json"}
        )
        calls = answer.summaries
        grown = [
            *items,
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "ok"}]},
            user("And then?"),
        ]
        second = client.post("/v1/responses", json=agent_body(grown))
    assert first.status_code == 200, first.text
    assert first.headers["x-gateway-action"] == "compress"
    assert first.headers["x-gateway-prompt-tokens"] == str(received)
    forwarded = int(first.headers["x-gateway-forwarded-tokens"])
    assert forwarded <= 150_000
    sent = orjson.loads(answer.main[0])
    assert {k: v for k, v in sent.items() if k != "input"} == {k: v for k, v in body.items() if k != "input"}
    assert count_responses(shared_counter(), "gpt-5.4", sent).total == forwarded
    assert sum(1 for item in sent["input"] if _is_summary(item)) == 1
    assert sent["input"][-1] == items[-1]
    assert_groups_intact(sent["input"], items)
    assert calls > 0
    assert second.status_code == 200 and second.headers["x-gateway-action"] == "compress"
    assert answer.summaries == calls  # the cached summary serves the next turn


def test_responses_tool_output_document_over_the_cliff_is_excerpted_with_its_call(
    tmp_path: Path, redis_url: str, upstream: Any, tenant_name: str
) -> None:
    router, answer = upstream
    prose = ProseGenerator(9)
    sentences = [prose.sentence() for _ in range(16_000)]
    sentences[10_000] = "The deployment password for the staging cluster is 7731-ORCHID."
    items = [
        user("Read the log."),
        {
            "type": "function_call",
            "id": "fc_1",
            "call_id": "c1",
            "name": "shell",
            "arguments": '{"cmd": "cat log"}',
        },
        {"type": "function_call_output", "call_id": "c1", "output": " ".join(sentences)},
        user("What is the deployment password for the staging cluster?"),
    ]
    body = agent_body(items)
    assert count_responses(shared_counter(), "gpt-5.4", body).total > 272_000
    config = make_config(tenants={tenant_name: {"keys": [TENANT_KEY]}})
    with gateway_client(tmp_path, redis_url, router, config=config) as client:
        response = client.post("/v1/responses", json=body)
    assert response.status_code == 200, response.text
    assert response.headers["x-gateway-action"] == "retrieve"
    sent = orjson.loads(answer.main[0])["input"]
    assert [kind_of(item) for item in sent] == ["message", "function_call", "function_call_output", "message"]
    assert sent[1] == items[1] and sent[3] == items[3]
    assert "7731-ORCHID" in sent[2]["output"] and len(sent[2]["output"]) < len(items[2]["output"]) // 2


def chain_config(tenant: str, *, on_exhausted: str = "reject") -> dict[str, Any]:
    config = make_config(tenants={tenant: {"keys": [TENANT_KEY]}})
    config["policies"] = {
        "bands": {"gpt-5.2": {"cliff_tokens": 2000, "warning_tokens": 1000}},
        "default": {"name": "default", "on_exhausted": on_exhausted},
    }
    return config


def test_responses_chain_crossing_the_warning_line_is_warned_then_rejected(
    tmp_path: Path, redis_url: str, upstream: Any, tenant_name: str
) -> None:
    router, answer = upstream
    answer.usage = [(700, 100), (1100, 100), (1900, 300)]
    turn = {"model": "gpt-5.2", "input": "go on"}
    with gateway_client(tmp_path, redis_url, router, config=chain_config(tenant_name)) as client:
        first = client.post("/v1/responses", json=turn)
        second = client.post("/v1/responses", json={**turn, "previous_response_id": first.json()["id"]})
        third = client.post("/v1/responses", json={**turn, "previous_response_id": second.json()["id"]})
        fourth = client.post("/v1/responses", json={**turn, "previous_response_id": third.json()["id"]})
        unknown = client.post("/v1/responses", json={**turn, "previous_response_id": "resp_never_seen"})
    assert "x-gateway-warning" not in second.headers  # 800 + this turn: below the line
    assert third.status_code == 200 and third.headers["x-gateway-action"] == "forward"
    warning = third.headers["x-gateway-warning"]
    assert "warning line" in warning and f"history stored upstream ({second.json()['id']})" in warning
    assert fourth.status_code == 400
    error = fourth.json()["error"]
    assert error["code"] == "context_length_exceeded"
    assert third.json()["id"] in error["message"] and "cannot compress history" in error["message"]
    assert len(answer.main) == 3  # neither the rejected turn nor the unknown chain went upstream
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "response_not_found"


def test_responses_chain_over_the_cliff_goes_on_with_a_warning_when_the_policy_forwards_the_exhausted(
    tmp_path: Path, redis_url: str, upstream: Any, tenant_name: str
) -> None:
    """Stored history cannot be cut; within the window the turn is not lost, it is billed above the cliff."""
    router, answer = upstream
    answer.usage = [(1100, 100), (1900, 300)]
    turn = {"model": "gpt-5.2", "input": "go on"}
    config = chain_config(tenant_name, on_exhausted="forward")
    with gateway_client(tmp_path, redis_url, router, config=config) as client:
        first = client.post("/v1/responses", json=turn)
        second = client.post("/v1/responses", json={**turn, "previous_response_id": first.json()["id"]})
        third = client.post("/v1/responses", json={**turn, "previous_response_id": second.json()["id"]})
    assert third.status_code == 200, third.text
    warning = third.headers["x-gateway-warning"]
    assert f"history of {second.json()['id']} is stored upstream" in warning
    assert "above its price cliff of 2000 tokens (on_exhausted: forward, nothing left to cut)" in warning
    assert len(answer.main) == 3


def test_responses_chain_to_an_unknown_id_is_warned_for_a_tenant_allowed_to_name_one(
    tmp_path: Path, redis_url: str, upstream: Any, tenant_name: str
) -> None:
    router, answer = upstream
    config = chain_config(tenant_name)
    config["tenants"][tenant_name]["allow_unknown_responses"] = True
    turn = {"model": "gpt-5.2", "input": "go on", "previous_response_id": "resp_never_seen"}
    with gateway_client(tmp_path, redis_url, router, config=config) as client:
        unknown = client.post("/v1/responses", json=turn)
    assert unknown.status_code == 200 and len(answer.main) == 1
    assert "unknown to the gateway" in unknown.headers["x-gateway-warning"]


def two_providers() -> dict[str, Any]:
    config = make_config()
    config["providers"]["other"] = {"base_url": OTHER, "api_key": "sk-other"}
    config["models"]["far"] = {"provider": "other", "upstream_model": "far-v2", "context_window": 100_000}
    return config


def test_responses_calls_by_id_go_to_the_provider_that_made_the_response(
    tmp_path: Path, redis_url: str
) -> None:
    router = respx.Router(assert_all_called=False)
    router.post(f"{OTHER}/responses").mock(
        return_value=httpx.Response(
            200,
            json={"id": "resp_far_1", "object": "response", "usage": {"input_tokens": 5, "output_tokens": 1}},
        )
    )
    far = router.get(f"{OTHER}/responses/resp_far_1").mock(
        return_value=httpx.Response(200, json={"id": "resp_far_1"})
    )
    cancel = router.post(f"{OTHER}/responses/resp_far_1/cancel").mock(
        return_value=httpx.Response(200, json={"status": "cancelled"})
    )
    first = router.get(f"{UPSTREAM}/responses/resp_unknown").mock(
        return_value=httpx.Response(404, json={"error": {"message": "no"}})
    )
    tokens = router.post(f"{OTHER}/responses/input_tokens").mock(
        return_value=httpx.Response(200, json={"input_tokens": 3})
    )
    with gateway_client(tmp_path, redis_url, router, config=two_providers()) as client:
        assert client.post("/v1/responses", json={"model": "far", "input": "hi"}).status_code == 200
        got = client.get("/v1/responses/resp_far_1?include[]=message.output_text.logprobs")
        cancelled = client.post("/v1/responses/resp_far_1/cancel")
        missing = client.get("/v1/responses/resp_unknown")
        counted = client.post(
            "/v1/responses/input_tokens?client_version=1", json={"model": "far", "input": "hi"}
        )
        models = client.get("/v1/models?client_version=0.40.0")
    assert (
        got.status_code == 200
        and far.calls.last.request.url.query == b"include[]=message.output_text.logprobs"
    )
    assert cancelled.json() == {"status": "cancelled"} and cancel.called
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "response_not_found"
    assert not first.called  # an id the gateway never saw this tenant create stays with the gateway
    assert counted.json() == {"input_tokens": 3}
    assert orjson.loads(tokens.calls.last.request.content)["model"] == "far-v2"
    assert models.status_code == 200


def test_responses_websocket_upgrade_is_refused_with_a_plain_http_error(
    tmp_path: Path, redis_url: str, upstream: Any
) -> None:
    router, _ = upstream
    with gateway_client(tmp_path, redis_url, router) as client:
        with pytest.raises(WebSocketDenialResponse) as refused:
            with client.websocket_connect("/v1/responses"):
                pass
    assert refused.value.status_code == 426
    assert refused.value.json()["error"]["code"] == "websocket_not_supported"


def test_responses_compact_takes_a_budget_hold_and_is_refused_over_a_hard_budget(
    tmp_path: Path, redis_url: str, tenant_name: str
) -> None:
    router = respx.Router(assert_all_called=False)
    compact = router.post(f"{UPSTREAM}/responses/compact").mock(
        return_value=httpx.Response(
            200, json={"output": [], "usage": {"input_tokens": 9, "output_tokens": 2}}
        )
    )
    counted = router.post(f"{UPSTREAM}/responses/input_tokens").mock(
        return_value=httpx.Response(200, json={"input_tokens": 9})
    )
    budget = {"monthly_usd": "0.000001"}  # less than any compact of gpt-5.4 can cost
    config = make_config(tenants={tenant_name: {"keys": [TENANT_KEY], "budget": budget}})
    body = {"model": "gpt-5.4", "input": "compact this conversation"}
    with gateway_client(tmp_path, redis_url, router, config=config) as client:
        refused = client.post("/v1/responses/compact", json=body)
        free = client.post("/v1/responses/input_tokens", json=body)
    assert refused.status_code == 429 and refused.json()["error"]["code"] == "budget_exceeded"
    assert not compact.called
    assert free.status_code == 200 and counted.called  # counting runs no model: no hold to refuse
