"""Bad input gets an OpenAI-style error with the right status, and never reaches the upstream."""

from __future__ import annotations

from pathlib import Path

import pytest
import respx

from tests.factories import OTHER_KEY, UPSTREAM, chat_body, gateway_client, make_config


@pytest.fixture
def router() -> respx.Router:
    return respx.Router(assert_all_called=False)


@pytest.mark.parametrize(
    ("content", "status", "code", "param"),
    [
        (b"{not json", 400, "invalid_json", None),
        (b"", 400, "invalid_json", None),
        (b"[1, 2]", 400, "invalid_type", None),
        (b'{"messages": [{"role": "user", "content": "x"}]}', 400, "missing_required_parameter", "model"),
        (b'{"model": 5, "messages": []}', 400, "invalid_type", "model"),
        (b'{"model": "gpt-5.4"}', 400, "missing_required_parameter", "messages"),
        (b'{"model": "gpt-5.4", "messages": "hi"}', 400, "invalid_type", "messages"),
        (b'{"model": "gpt-5.4", "messages": []}', 400, "empty_array", "messages"),
        (b'{"model": "gpt-5.4", "messages": ["hi"]}', 400, "invalid_type", "messages[0]"),
        (b'{"model": "gpt-5.4", "messages": [{"content": "hi"}]}', 400, "invalid_type", "messages[0].role"),
        (
            b'{"model": "gpt-5.4", "messages": [{"role": "user"}], "stream": "yes"}',
            400,
            "invalid_type",
            "stream",
        ),
        (
            b'{"model": "nope", "messages": [{"role": "user", "content": "x"}]}',
            404,
            "model_not_found",
            "model",
        ),
    ],
)
def test_chat_rejects_bad_input(
    tmp_path: Path,
    redis_url: str,
    router: respx.Router,
    content: bytes,
    status: int,
    code: str,
    param: str | None,
) -> None:
    upstream = router.post(f"{UPSTREAM}/chat/completions")
    with gateway_client(tmp_path, redis_url, router) as client:
        response = client.post(
            "/v1/chat/completions", content=content, headers={"content-type": "application/json"}
        )
    assert response.status_code == status
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["code"] == code
    assert error["param"] == param
    assert error["message"]
    assert upstream.call_count == 0
    assert response.headers["x-gateway-request-id"]


def test_oversize_body_is_413(tmp_path: Path, redis_url: str, router: respx.Router) -> None:
    config = make_config(limits={"max_body_bytes": 1000})
    upstream = router.post(f"{UPSTREAM}/chat/completions")
    with gateway_client(tmp_path, redis_url, router, config=config) as client:
        big = chat_body(messages=[{"role": "user", "content": "x" * 2000}])
        response = client.post("/v1/chat/completions", json=big)
        chunked = client.post(
            "/v1/chat/completions", content=iter([b'{"model": "gpt-5.4", "messages": [', b"1" * 1500, b"]}"])
        )
    for answer in (response, chunked):
        assert answer.status_code == 413
        assert answer.json()["error"]["code"] == "request_too_large"
    assert upstream.call_count == 0


@pytest.mark.parametrize(
    "headers",
    [
        {"authorization": ""},
        {"authorization": "Bearer wrong-key"},
        {"authorization": "Basic abc"},
    ],
)
def test_bad_keys_are_401(
    tmp_path: Path, redis_url: str, router: respx.Router, headers: dict[str, str]
) -> None:
    with gateway_client(tmp_path, redis_url, router) as client:
        response = client.post("/v1/chat/completions", json=chat_body(), headers=headers)
        models = client.get("/v1/models", headers=headers)
    for answer in (response, models):
        assert answer.status_code == 401
        assert answer.json()["error"]["type"] == "authentication_error"


def test_alternative_key_headers_authenticate(tmp_path: Path, redis_url: str, router: respx.Router) -> None:
    with gateway_client(tmp_path, redis_url, router) as client:
        for header in ("api-key", "x-api-key"):
            response = client.get("/v1/models", headers={"authorization": "", header: OTHER_KEY})
            assert response.status_code == 200, header


def test_hashed_key_in_config_authenticates(tmp_path: Path, redis_url: str, router: respx.Router) -> None:
    import hashlib

    digest = hashlib.sha256(b"sk-hashed").hexdigest()
    config = make_config(tenants={"hashed": {"keys": [f"sha256:{digest}"]}})
    with gateway_client(tmp_path, redis_url, router, config=config) as client:
        assert client.get("/v1/models", headers={"authorization": "Bearer sk-hashed"}).status_code == 200
        assert client.get("/v1/models", headers={"authorization": f"Bearer {digest}"}).status_code == 401


def test_unknown_route_outside_v1_is_openai_404(tmp_path: Path, redis_url: str, router: respx.Router) -> None:
    with gateway_client(tmp_path, redis_url, router) as client:
        response = client.get("/nowhere")
        wrong_method = client.get("/v1/chat/completions")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "unknown_url"
    assert wrong_method.status_code == 404
    assert wrong_method.json()["error"]["code"] == "unknown_url"
