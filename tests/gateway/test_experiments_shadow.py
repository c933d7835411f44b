"""Shadow experiments through the app, the upstream mocked at the HTTP boundary (respx) and the ledger,
budgets and pairs in a real Redis: the client's answer is the primary's, untouched; the candidate's copy
is made afterwards, once, billed to the experiment, and compared."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import redis
import respx

from gateway.ledger import LedgerReader, Period
from tests.factories import OTHER_KEY, UPSTREAM, chat_body, completion, gateway_client, make_config

pytestmark = pytest.mark.usefixtures("experiments_flush_often")

PRICED = {"input": "1.00", "cached_input": "0.10", "output": "4.00"}


@pytest.fixture
def router() -> respx.Router:
    return respx.Router(assert_all_called=False)


def config_with(name: str, **experiment: Any) -> dict[str, Any]:
    config = make_config()
    config["models"]["gpt-5.2"] = {"provider": "mock", "context_window": 400_000, "pricing": PRICED}
    # The app runs in the test's own process, whose CPU (the suite's collections, the test polling) is not
    # the gateway's load: no shadow call is shed for it here (shedding has tests of its own).
    config["limits"] = {**config.get("limits", {}), "shadow_shed_above_cpu": 1_000.0}
    config["experiments"] = {
        name: {
            "mode": "shadow",
            "primary": ["gpt-5.4"],
            "candidate": "gpt-5.2",
            "sample_rate": 1.0,
            "budget_usd_per_day": 5,
            **experiment,
        }
    }
    return config


def by_model(answers: dict[str, Callable[[dict[str, Any]], httpx.Response]]) -> Callable[..., httpx.Response]:
    def answer(request: httpx.Request) -> httpx.Response:
        body = orjson.loads(request.content)
        return answers[body["model"]](body)

    return answer


def wait_for(check: Callable[[], Any], seconds: float = 15.0) -> Any:
    """Poll until ``check`` returns something truthy (shadow work runs after the response)."""
    deadline = time.monotonic() + seconds
    while True:
        found = check()
        if found or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


def pairs_of(redis_url: str, name: str) -> list[dict[str, Any]]:
    client = redis.Redis.from_url(redis_url)
    try:
        return [
            orjson.loads(fields[b"pair"]) for _, fields in client.xrange(f"gw:{{experiment:{name}}}:pairs")
        ]
    finally:
        client.close()


def traffic_of(redis_url: str, name: str) -> dict[str, int]:
    client = redis.Redis.from_url(redis_url)
    try:
        total: dict[str, int] = {}
        for key in client.scan_iter(f"gw:{{experiment:{name}}}:traffic:*"):
            for field, value in client.hgetall(key).items():
                total[field.decode()] = total.get(field.decode(), 0) + int(value)
        return total
    finally:
        client.close()


async def events_of(redis_url: str, tenant: str) -> list[Any]:
    import redis.asyncio as aioredis

    client = aioredis.Redis.from_url(redis_url)
    try:
        now = int(time.time() * 1000)
        period = Period(now - 3_600_000, now + 3_600_000)
        return [event async for event in LedgerReader(client).events(tenant, period)]
    finally:
        await client.aclose()


def ledger(redis_url: str, tenant: str) -> list[Any]:
    import anyio

    return anyio.run(events_of, redis_url, tenant)


def test_the_client_gets_the_primary_answer_and_the_candidate_is_compared_and_billed_to_the_experiment(
    tmp_path: Path, redis_url: str, router: respx.Router
) -> None:
    name = f"shadow-{uuid.uuid4().hex[:8]}"
    primary = completion(
        "The capital of France is Paris.", usage={"prompt_tokens": 40, "completion_tokens": 8}
    )
    candidate = completion(
        "Paris is the capital.", model="gpt-5.2", usage={"prompt_tokens": 40, "completion_tokens": 5}
    )
    route = router.post(f"{UPSTREAM}/chat/completions").mock(
        side_effect=by_model(
            {
                "gpt-5.4": lambda body: httpx.Response(200, content=orjson.dumps(primary)),
                "gpt-5.2": lambda body: httpx.Response(200, json=candidate),
            }
        )
    )
    with gateway_client(tmp_path, redis_url, router, config=config_with(name)) as client:
        response = client.post("/v1/chat/completions", json=chat_body())
        request_id = response.headers["x-gateway-request-id"]
        found = wait_for(lambda: pairs_of(redis_url, name))
        counted = wait_for(lambda: traffic_of(redis_url, name).get("shadowed"))
    assert response.status_code == 200
    assert response.content == orjson.dumps(primary)  # the primary's bytes, untouched
    assert "x-gateway-experiment" not in response.headers
    models = [orjson.loads(call.request.content)["model"] for call in route.calls]
    assert models == ["gpt-5.4", "gpt-5.2"]  # the candidate after the primary, once
    assert counted == 1
    [pair] = found
    assert pair["id"] == request_id and pair["mode"] == "shadow" and pair["tenant"] == "acme"
    assert pair["primary"]["model"] == "gpt-5.4" and pair["primary"]["output_tokens"] == 8
    assert pair["candidate"]["model"] == "gpt-5.2" and pair["candidate"]["output_tokens"] == 5
    assert pair["candidate"]["error"] is None
    assert pair["agreement"]["kind"] == "text" and pair["agreement"]["method"] == "overlap"
    assert 0 < pair["agreement"]["score"] < 1
    shadow_events = ledger(redis_url, f"experiment:{name}")
    assert [(event.action, event.model, event.parent_id) for event in shadow_events] == [
        ("shadow", "gpt-5.2", request_id)
    ]
    assert shadow_events[0].cost_nanos == 40 * 1_000 + 5 * 4_000  # $1/M in, $4/M out
    assert shadow_events[0].saving_nanos == 0
    tenant_events = [
        event
        for event in ledger(redis_url, "acme")
        if event.parent_id == request_id or event.id == request_id
    ]
    assert [event.model for event in tenant_events] == ["gpt-5.4"]  # the tenant pays only its own call


def test_a_failing_candidate_is_tried_once_and_never_fails_the_request(
    tmp_path: Path, redis_url: str, router: respx.Router
) -> None:
    name = f"failing-{uuid.uuid4().hex[:8]}"
    calls: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        model = orjson.loads(request.content)["model"]
        calls.append(model)
        if model == "gpt-5.2":
            return httpx.Response(503, json={"error": {"message": "overloaded"}})
        return httpx.Response(200, json=completion())

    router.post(f"{UPSTREAM}/chat/completions").mock(side_effect=answer)
    with gateway_client(tmp_path, redis_url, router, config=config_with(name)) as client:
        response = client.post("/v1/chat/completions", json=chat_body())
        [pair] = wait_for(lambda: pairs_of(redis_url, name))
        failed = wait_for(lambda: traffic_of(redis_url, name).get("failed"))
    assert response.status_code == 200 and response.json()["choices"][0]["message"]["content"] == "Hi!"
    assert calls == ["gpt-5.4", "gpt-5.2"]  # no retry of the candidate (the provider retries 3 times)
    assert pair["candidate"]["error"] == "upstream_unavailable" and pair["candidate"]["status"] == 503
    assert pair["agreement"] is None
    assert failed == 1
    assert ledger(redis_url, f"experiment:{name}") == []  # nothing answered: nothing billed


def test_a_tenant_that_allows_no_experiments_is_never_mirrored(
    tmp_path: Path, redis_url: str, router: respx.Router
) -> None:
    name = f"excluded-{uuid.uuid4().hex[:8]}"
    config = config_with(name)
    config["tenants"]["globex"]["experiments"] = False
    route = router.post(f"{UPSTREAM}/chat/completions").mock(
        return_value=httpx.Response(200, json=completion())
    )
    with gateway_client(tmp_path, redis_url, router, config=config) as client:
        response = client.post(
            "/v1/chat/completions", json=chat_body(), headers={"authorization": f"Bearer {OTHER_KEY}"}
        )
        excluded = wait_for(lambda: traffic_of(redis_url, name).get("excluded"))
    assert response.status_code == 200
    assert excluded == 1
    assert route.call_count == 1
    assert pairs_of(redis_url, name) == []


def test_a_spent_budget_stops_shadowing_for_the_day(
    tmp_path: Path, redis_url: str, router: respx.Router
) -> None:
    name = f"budget-{uuid.uuid4().hex[:8]}"
    # the candidate's hold is its input plus 4,096 output tokens at $4/M: about $0.0164, above the budget
    config = config_with(name, budget_usd_per_day="0.01")
    route = router.post(f"{UPSTREAM}/chat/completions").mock(
        return_value=httpx.Response(200, json=completion())
    )
    with gateway_client(tmp_path, redis_url, router, config=config) as client:
        for _ in range(3):
            assert client.post("/v1/chat/completions", json=chat_body()).status_code == 200
        over = wait_for(lambda: (traffic_of(redis_url, name).get("over_budget") or 0) >= 3)
    assert over
    assert [orjson.loads(call.request.content)["model"] for call in route.calls] == ["gpt-5.4"] * 3
    assert pairs_of(redis_url, name) == []


def test_the_candidate_copy_stays_within_a_budget_that_holds_it(
    tmp_path: Path, redis_url: str, router: respx.Router
) -> None:
    name = f"capped-{uuid.uuid4().hex[:8]}"
    config = config_with(name, budget_usd_per_day="0.02")  # holds one call (about $0.0164), not two
    router.post(f"{UPSTREAM}/chat/completions").mock(
        return_value=httpx.Response(
            200,
            json=completion(usage={"prompt_tokens": 9, "completion_tokens": 4_000, "total_tokens": 4_009}),
        )
    )
    with gateway_client(tmp_path, redis_url, router, config=config) as client:
        assert client.post("/v1/chat/completions", json=chat_body()).status_code == 200
        wait_for(lambda: pairs_of(redis_url, name))
        wait_for(lambda: ledger(redis_url, f"experiment:{name}"))
        assert client.post("/v1/chat/completions", json=chat_body()).status_code == 200
        over = wait_for(lambda: traffic_of(redis_url, name).get("over_budget"))
    assert over == 1
    assert len(pairs_of(redis_url, name)) == 1
    assert sum(event.cost_nanos for event in ledger(redis_url, f"experiment:{name}")) <= 20_000_000


def test_a_streamed_request_is_compared_by_its_tool_calls(
    tmp_path: Path, redis_url: str, router: respx.Router
) -> None:
    name = f"tools-{uuid.uuid4().hex[:8]}"

    def chunks(model: str, tool: str, arguments: str) -> bytes:
        def call(function: dict[str, str], **extra: str) -> dict[str, Any]:
            return {
                "choices": [
                    {"index": 0, "delta": {"tool_calls": [{"index": 0, **extra, "function": function}]}}
                ]
            }

        parts = [
            call({"name": tool, "arguments": ""}, id="call_1", type="function"),
            call({"arguments": arguments[:5]}),
            call({"arguments": arguments[5:]}),
            {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
            {"choices": [], "usage": {"prompt_tokens": 30, "completion_tokens": 12, "total_tokens": 42}},
        ]
        events = b"".join(b"data: " + orjson.dumps({"model": model, **part}) + b"\n\n" for part in parts)
        return events + b"data: [DONE]\n\n"

    def stream(tool: str, arguments: str) -> Callable[[dict[str, Any]], httpx.Response]:
        def respond(body: dict[str, Any]) -> httpx.Response:
            payload = chunks(body["model"], tool, arguments)

            async def pieces() -> AsyncIterator[bytes]:
                for start in range(0, len(payload), 40):
                    yield payload[start : start + 40]

            return httpx.Response(200, content=pieces(), headers={"content-type": "text/event-stream"})

        return respond

    router.post(f"{UPSTREAM}/chat/completions").mock(
        side_effect=by_model(
            {
                "gpt-5.4": stream("search", '{"query": "paris", "limit": 3}'),
                "gpt-5.2": stream("search", '{"limit":3,"query":"paris"}'),
            }
        )
    )
    tools = [{"type": "function", "function": {"name": "search", "parameters": {"type": "object"}}}]
    with gateway_client(tmp_path, redis_url, router, config=config_with(name)) as client:
        with client.stream(
            "POST", "/v1/chat/completions", json=chat_body(stream=True, tools=tools)
        ) as response:
            relayed = b"".join(response.iter_bytes())
        [pair] = wait_for(lambda: pairs_of(redis_url, name))
    assert b"usage" not in relayed  # the client did not ask for it
    assert pair["tools"] is True
    assert pair["agreement"] == {
        "kind": "tool", "score": 1.0, "method": "tool", "same_tool": True, "same_args": True,
    }  # fmt: skip
    assert pair["candidate"]["ttft_ms"] is not None and pair["candidate"]["finish_reason"] == "tool_calls"
    assert pair["primary"]["ttft_ms"] is not None


def test_an_experiment_on_another_model_leaves_the_request_alone(
    tmp_path: Path, redis_url: str, router: respx.Router
) -> None:
    name = f"other-{uuid.uuid4().hex[:8]}"
    config = config_with(name, primary=["small"])
    route = router.post(f"{UPSTREAM}/chat/completions").mock(
        return_value=httpx.Response(200, json=completion())
    )
    with gateway_client(tmp_path, redis_url, router, config=config) as client:
        assert client.post("/v1/chat/completions", json=chat_body()).status_code == 200
        assert client.post("/v1/chat/completions", json=chat_body(model="small")).status_code == 200
        wait_for(lambda: traffic_of(redis_url, name).get("shadowed"))
    assert [orjson.loads(call.request.content)["model"] for call in route.calls] == [
        "gpt-5.4", "gpt-5.4-mini", "gpt-5.2"
    ]  # fmt: skip
    [pair] = pairs_of(redis_url, name)
    assert pair["primary"]["model"] == "small"
    assert json.loads(json.dumps(traffic_of(redis_url, name)))["n:0"] == 1


def test_a_responses_request_is_shadowed_without_being_stored_upstream(
    tmp_path: Path, redis_url: str, router: respx.Router
) -> None:
    name = f"responses-{uuid.uuid4().hex[:8]}"

    def response(body: dict[str, Any]) -> httpx.Response:
        text = "Paris is the capital of France." if body["model"] == "gpt-5.4" else "Paris."
        return httpx.Response(
            200,
            json={
                "id": f"resp_{body['model']}",
                "object": "response",
                "status": "completed",
                "model": body["model"],
                "output": [
                    {
                        "type": "message",
                        "role": "assistant",
                        "content": [{"type": "output_text", "text": text}],
                    }
                ],
                "usage": {"input_tokens": 20, "output_tokens": 7 if body["model"] == "gpt-5.4" else 2},
            },
        )

    route = router.post(f"{UPSTREAM}/responses").mock(
        side_effect=by_model({"gpt-5.4": response, "gpt-5.2": response})
    )
    with gateway_client(tmp_path, redis_url, router, config=config_with(name)) as client:
        answer = client.post(
            "/v1/responses", json={"model": "gpt-5.4", "input": "What is the capital of France?"}
        )
        [pair] = wait_for(lambda: pairs_of(redis_url, name))
    assert answer.status_code == 200 and answer.json()["id"] == "resp_gpt-5.4"
    sent = [orjson.loads(call.request.content) for call in route.calls]
    assert [body["model"] for body in sent] == ["gpt-5.4", "gpt-5.2"]
    assert "store" not in sent[0] and sent[1]["store"] is False  # the candidate's copy is not kept upstream
    assert (pair["primary"]["output_tokens"], pair["candidate"]["output_tokens"]) == (7, 2)
    assert pair["agreement"]["method"] == "overlap" and 0 < pair["agreement"]["score"] < 1


def test_embeddings_and_a_judge_compare_the_texts_and_are_billed_to_the_experiment(
    tmp_path: Path, redis_url: str, router: respx.Router
) -> None:
    name = f"judged-{uuid.uuid4().hex[:8]}"
    config = config_with(name, embedding_model="text-embedding-3-small", judge={"model": "small"})
    config["models"]["small"]["pricing"] = PRICED
    config["models"]["text-embedding-3-small"]["pricing"] = {"input": "0.02", "output": "0"}
    judged: list[dict[str, Any]] = []

    def chat(request: httpx.Request) -> httpx.Response:
        body = orjson.loads(request.content)
        if body["model"] == "gpt-5.4-mini":  # the judge
            judged.append(body)
            return httpx.Response(200, json=completion("7", model="gpt-5.4-mini"))
        return httpx.Response(
            200, json=completion("Paris." if body["model"] == "gpt-5.2" else "It is Paris.")
        )

    router.post(f"{UPSTREAM}/chat/completions").mock(side_effect=chat)
    router.post(f"{UPSTREAM}/embeddings").mock(
        return_value=httpx.Response(
            200,
            json={
                "data": [{"index": 0, "embedding": [1.0, 0.0]}, {"index": 1, "embedding": [0.6, 0.8]}],
                "usage": {"prompt_tokens": 6, "total_tokens": 6},
            },
        )
    )
    with gateway_client(tmp_path, redis_url, router, config=config) as client:
        response = client.post("/v1/chat/completions", json=chat_body())
        [pair] = wait_for(lambda: pairs_of(redis_url, name))
        events = wait_for(
            lambda: (
                len(ledger(redis_url, f"experiment:{name}")) >= 3 and ledger(redis_url, f"experiment:{name}")
            )
        )
    assert pair["agreement"] == {
        "kind": "text",
        "score": 0.6,
        "method": "embedding",
        "same_tool": None,
        "same_args": None,
    }
    assert pair["judge"] == {"score": 0.7, "model": "small"}
    [prompt] = judged
    assert "It is Paris." in prompt["messages"][1]["content"] and "Paris." in prompt["messages"][1]["content"]
    rid = response.headers["x-gateway-request-id"]
    assert sorted(event.action for event in events) == ["embeddings", "judge", "shadow"]
    assert all(event.parent_id == rid for event in events)
