"""Attack (of sorts): a prompt over its model's window that retrieval cannot cut (no block is a document).

Such a request fails the same way however often it is sent, so it is answered 400
``context_length_exceeded`` in its front's shape, never a 503 the SDKs would retry; nothing goes upstream.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import orjson
import respx

from tests.factories import TENANT_KEY, UPSTREAM, gateway_client, make_config

CLAUDE = "https://api.anthropic.test/v1"
TURNS = 400
"""Short turns of about 70 tokens each: some 28,000 tokens, none of them a document to excerpt."""


def small_window(tenant: str) -> dict[str, Any]:
    config = make_config(tenants={tenant: {"keys": [TENANT_KEY]}})
    config["models"]["tiny"] = {"provider": "mock", "context_window": 20_000}
    config["providers"]["claude"] = {"base_url": CLAUDE, "api_key": "sk-ant", "kind": "anthropic"}
    config["models"]["claude-tiny"] = {"provider": "claude", "context_window": 20_000}
    return config


def turns() -> list[dict[str, Any]]:
    sentence = "the quick brown fox jumps over the lazy dog and keeps running far away " * 5
    return [
        {"role": "user" if index % 2 == 0 else "assistant", "content": f"{index}: {sentence}"}
        for index in range(TURNS)
    ] + [{"role": "user", "content": "and now?"}]


def test_chat_over_the_window_with_nothing_to_cut_is_a_400(
    tmp_path: Path, redis_url: str, tenant_name: str
) -> None:
    router = respx.Router(assert_all_called=False)
    forwarded = router.post(f"{UPSTREAM}/chat/completions").mock(return_value=httpx.Response(500))
    with gateway_client(tmp_path, redis_url, router, config=small_window(tenant_name)) as client:
        answer = client.post("/v1/chat/completions", json={"model": "tiny", "messages": turns()})
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert (error["type"], error["code"]) == ("invalid_request_error", "context_length_exceeded")
    assert "maximum context length is 20000 tokens" in error["message"]
    assert not any(sent_whole(call.request) for call in forwarded.calls)  # the summary's calls may go


def sent_whole(request: httpx.Request) -> bool:
    return len(orjson.loads(request.content).get("messages", [])) == TURNS + 1


def test_messages_over_the_window_with_nothing_to_cut_is_anthropics_400(
    tmp_path: Path, redis_url: str, tenant_name: str
) -> None:
    router = respx.Router(assert_all_called=False)
    forwarded = router.post(f"{CLAUDE}/messages").mock(return_value=httpx.Response(500))
    headers = {"authorization": "", "x-api-key": TENANT_KEY, "anthropic-version": "2023-06-01"}
    body = {"model": "claude-tiny", "max_tokens": 100, "messages": turns()}
    with gateway_client(tmp_path, redis_url, router, config=small_window(tenant_name)) as client:
        answer = client.post("/v1/messages", json=body, headers=headers)
    assert answer.status_code == 400, answer.text
    document = answer.json()
    assert document["type"] == "error" and document["error"]["type"] == "invalid_request_error"
    assert document["error"]["message"].startswith("prompt is too long: ")
    assert not any(sent_whole(call.request) for call in forwarded.calls)
