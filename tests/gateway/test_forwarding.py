"""Forwarding, retries, fallbacks and error mapping, with the upstream mocked at the HTTP boundary."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import orjson
import pytest
import respx

from gateway.upstream.calls import parse_retry_after
from tests.factories import UPSTREAM, chat_body, completion, gateway_client, make_config


@pytest.fixture
def router() -> respx.Router:
    return respx.Router(assert_all_called=False)


def test_chat_forwards_raw_body_and_upstream_key(
    tmp_path: Path, redis_url: str, router: respx.Router
) -> None:
    route = router.post(f"{UPSTREAM}/chat/completions").mock(
        return_value=httpx.Response(200, json=completion())
    )
    raw = b'{"model":"gpt-5.4",  "messages":[{"role":"user","content":"Hello there"}], "temperature":0.2}'
    with gateway_client(tmp_path, redis_url, router) as client:
        response = client.post(
            "/v1/chat/completions", content=raw, headers={"content-type": "application/json"}
        )
    assert response.status_code == 200
    assert response.json()["choices"][0]["message"]["content"] == "Hi!"
    sent = route.calls.last.request
    assert sent.content == raw  # unchanged bodies go upstream byte for byte
    assert sent.headers["authorization"] == "Bearer sk-upstream"
    assert response.headers["x-gateway-action"] == "forward"
    assert response.headers["x-gateway-model"] == "gpt-5.4"
    assert response.headers["x-gateway-request-id"].startswith("req_")


def test_chat_renames_model_for_upstream(tmp_path: Path, redis_url: str, router: respx.Router) -> None:
    route = router.post(f"{UPSTREAM}/chat/completions").mock(
        return_value=httpx.Response(200, json=completion())
    )
    with gateway_client(tmp_path, redis_url, router) as client:
        response = client.post("/v1/chat/completions", json=chat_body(model="small"))
    assert response.status_code == 200
    assert orjson.loads(route.calls.last.request.content)["model"] == "gpt-5.4-mini"


def test_incoming_request_id_is_echoed_but_the_gateway_keeps_its_own(
    tmp_path: Path, redis_url: str, router: respx.Router
) -> None:
    router.post(f"{UPSTREAM}/chat/completions").mock(return_value=httpx.Response(200, json=completion()))
    with gateway_client(tmp_path, redis_url, router) as client:
        first, second = (
            client.post("/v1/chat/completions", json=chat_body(), headers={"x-request-id": "abc-123"})
            for _ in range(2)
        )
    assert first.headers["x-request-id"] == second.headers["x-request-id"] == "abc-123"
    own = {first.headers["x-gateway-request-id"], second.headers["x-gateway-request-id"]}
    assert len(own) == 2 and all(rid.startswith("req_") for rid in own)


def test_retry_503_then_200(tmp_path: Path, redis_url: str, router: respx.Router) -> None:
    route = router.post(f"{UPSTREAM}/chat/completions").mock(
        side_effect=[
            httpx.Response(503, json={"error": {"message": "busy"}}),
            httpx.Response(200, json=completion()),
        ]
    )
    with gateway_client(tmp_path, redis_url, router) as client:
        response = client.post("/v1/chat/completions", json=chat_body())
    assert response.status_code == 200
    assert route.call_count == 2


def test_retry_429_honours_retry_after(tmp_path: Path, redis_url: str, router: respx.Router) -> None:
    seen: list[float] = []
    answers = [
        httpx.Response(429, headers={"retry-after": "0.04"}, json={"error": {"message": "slow down"}}),
        httpx.Response(200, json=completion()),
    ]

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(time.monotonic())
        return answers[len(seen) - 1]

    router.post(f"{UPSTREAM}/chat/completions").mock(side_effect=answer)
    with gateway_client(tmp_path, redis_url, router) as client:
        response = client.post("/v1/chat/completions", json=chat_body())
    assert response.status_code == 200
    assert len(seen) == 2
    # the configured backoff is at most 0.01 s, so a gap of 0.04 s or more is the Retry-After at work
    assert seen[1] - seen[0] >= 0.04


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after": "2"}, 2.0),
        ({"retry-after-ms": "250"}, 0.25),
        ({"retry-after": "soon"}, None),
        ({}, None),
    ],
)
def test_parse_retry_after(headers: dict[str, str], expected: float | None) -> None:
    assert parse_retry_after(httpx.Headers(headers)) == expected


def test_retry_on_connect_error(tmp_path: Path, redis_url: str, router: respx.Router) -> None:
    route = router.post(f"{UPSTREAM}/chat/completions").mock(
        side_effect=[httpx.ConnectError("refused"), httpx.Response(200, json=completion())]
    )
    with gateway_client(tmp_path, redis_url, router) as client:
        response = client.post("/v1/chat/completions", json=chat_body())
    assert response.status_code == 200
    assert route.call_count == 2


def test_fallback_after_attempts_run_out(tmp_path: Path, redis_url: str, router: respx.Router) -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        model = orjson.loads(request.content)["model"]
        if model == "gpt-5.4":
            return httpx.Response(503, json={"error": {"message": "down"}})
        return httpx.Response(200, json=completion(model=model))

    route = router.post(f"{UPSTREAM}/chat/completions").mock(side_effect=answer)
    with gateway_client(tmp_path, redis_url, router) as client:
        response = client.post("/v1/chat/completions", json=chat_body())
    assert response.status_code == 200
    assert response.headers["x-gateway-model"] == "gpt-5.2"
    models = [orjson.loads(call.request.content)["model"] for call in route.calls]
    assert models == ["gpt-5.4", "gpt-5.4", "gpt-5.4", "gpt-5.2"]


def test_exhausted_passes_last_upstream_answer_through(
    tmp_path: Path, redis_url: str, router: respx.Router
) -> None:
    error = {"error": {"message": "overloaded", "type": "server_error", "param": None, "code": None}}
    route = router.post(f"{UPSTREAM}/chat/completions").mock(return_value=httpx.Response(503, json=error))
    with gateway_client(tmp_path, redis_url, router) as client:
        response = client.post("/v1/chat/completions", json=chat_body(model="gpt-5.2"))
    assert response.status_code == 503
    assert response.json() == error
    assert route.call_count == 3


def test_exhausted_by_transport_errors_is_502(tmp_path: Path, redis_url: str, router: respx.Router) -> None:
    router.post(f"{UPSTREAM}/chat/completions").mock(side_effect=httpx.ConnectError("refused"))
    with gateway_client(tmp_path, redis_url, router) as client:
        response = client.post("/v1/chat/completions", json=chat_body(model="gpt-5.2"))
    assert response.status_code == 502
    assert response.json()["error"]["code"] == "upstream_unavailable"


def test_non_retryable_upstream_error_passes_through_once(
    tmp_path: Path, redis_url: str, router: respx.Router
) -> None:
    error = {
        "error": {
            "message": "bad param",
            "type": "invalid_request_error",
            "param": "temperature",
            "code": None,
        }
    }
    route = router.post(f"{UPSTREAM}/chat/completions").mock(return_value=httpx.Response(400, json=error))
    with gateway_client(tmp_path, redis_url, router) as client:
        response = client.post("/v1/chat/completions", json=chat_body())
    assert response.status_code == 400
    assert response.json() == error
    assert route.call_count == 1


def test_embeddings_forwarded(tmp_path: Path, redis_url: str, router: respx.Router) -> None:
    answer = {
        "object": "list",
        "data": [{"object": "embedding", "index": 0, "embedding": [0.1]}],
        "model": "text-embedding-3-small",
        "usage": {"prompt_tokens": 2, "total_tokens": 2},
    }
    route = router.post(f"{UPSTREAM}/embeddings").mock(return_value=httpx.Response(200, json=answer))
    with gateway_client(tmp_path, redis_url, router) as client:
        response = client.post("/v1/embeddings", json={"model": "text-embedding-3-small", "input": "hi"})
    assert response.status_code == 200
    assert response.json() == answer
    assert route.call_count == 1


def test_models_listed_from_config(tmp_path: Path, redis_url: str, router: respx.Router) -> None:
    with gateway_client(tmp_path, redis_url, router) as client:
        listed = client.get("/v1/models").json()
        one = client.get("/v1/models/small")
        missing = client.get("/v1/models/nope")
    assert [m["id"] for m in listed["data"]] == list(make_config()["models"])
    assert one.json()["id"] == "small"
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "model_not_found"


def test_passthrough_forwards_only_listed_paths_by_body_model(
    tmp_path: Path, redis_url: str, router: respx.Router
) -> None:
    route = router.post(f"{UPSTREAM}/moderations").mock(return_value=httpx.Response(200, json={"ok": True}))
    config = make_config(passthrough=[{"path": "/moderations"}])
    with gateway_client(tmp_path, redis_url, router, config=config) as client:
        routed = client.post("/v1/moderations", json={"model": "gpt-5.2", "input": "x"})
        unlisted = client.get("/v1/files")
        no_model = client.post("/v1/moderations", json={"input": "x"})
    assert routed.json() == {"ok": True}
    assert route.call_count == 1
    assert unlisted.status_code == 404 and unlisted.json()["error"]["code"] == "unknown_url"
    assert no_model.status_code == 404 and no_model.json()["error"]["code"] == "unknown_url"


def test_passthrough_forwards_nothing_by_default(
    tmp_path: Path, redis_url: str, router: respx.Router
) -> None:
    route = router.post(f"{UPSTREAM}/moderations").mock(return_value=httpx.Response(200, json={"ok": True}))
    with gateway_client(tmp_path, redis_url, router) as client:
        refused = client.post("/v1/moderations", json={"model": "gpt-5.2", "input": "x"})
    assert refused.status_code == 404 and refused.json()["error"]["code"] == "unknown_url"
    assert route.call_count == 0


def test_health_and_readiness(tmp_path: Path, redis_url: str, router: respx.Router) -> None:
    with gateway_client(tmp_path, redis_url, router) as client:
        assert client.get("/healthz").json() == {"status": "ok"}
        ready = client.get("/readyz")
    assert ready.status_code == 200
    assert ready.json()["checks"] == {"config": "ok", "redis": "ok", "ledger": "ok", "redis_mode": "ok"}


@pytest.mark.anyio
async def test_default_client_never_keeps_upstream_cookies() -> None:
    from gateway.config.schema.root import ProviderConfig
    from gateway.upstream.clients import default_client

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200, headers={"set-cookie": "__cf_bm=abc; Path=/"}, json={"cookie": request.headers.get("cookie")}
        )

    client = default_client(ProviderConfig(base_url="http://upstream.test/v1"), transport="httpx")
    client._transport = httpx.MockTransport(answer)
    async with client:
        await client.get("http://upstream.test/v1/a")
        second = await client.get("http://upstream.test/v1/b")
    assert second.json() == {"cookie": None}
    assert not client.cookies


@pytest.mark.parametrize(
    ("path", "body", "named"),
    [
        ("/v1/chat/completions", chat_body(model="text-embedding-3-small"), "an embedding model"),
        ("/v1/responses", {"model": "text-embedding-3-small", "input": "Hi"}, "an embedding model"),
        ("/v1/responses/input_tokens", {"model": "text-embedding-3-small", "input": "Hi"}, "an embedding"),
        ("/v1/embeddings", {"model": "gpt-5.4", "input": "Hi"}, "a chat model"),
    ],
)
def test_a_model_of_the_other_kind_is_a_clear_400_never_forwarded(
    tmp_path: Path, redis_url: str, router: respx.Router, path: str, body: dict[str, object], named: str
) -> None:
    calls = router.route().mock(return_value=httpx.Response(200, json=completion()))
    with gateway_client(tmp_path, redis_url, router) as client:
        response = client.post(path, json=body)
    assert response.status_code == 400
    error = response.json()["error"]
    assert (error["code"], error["param"], error["type"]) == (
        "model_not_supported",
        "model",
        "invalid_request_error",
    )
    assert named in error["message"]
    assert calls.call_count == 0
