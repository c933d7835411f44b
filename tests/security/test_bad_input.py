"""Attack: inputs that used to end in a 500. Each is a clean OpenAI-shaped 4xx now, and the ones that
reach a model are forwarded as they should be."""

from __future__ import annotations

from pathlib import Path

import httpx
import orjson
import pytest
import respx

from tests.factories import ADMIN_KEY, UPSTREAM, chat_body, completion, gateway_client


def router_answering() -> tuple[respx.Router, respx.Route, respx.Route]:
    router = respx.Router(assert_all_called=False)
    chat = router.post(f"{UPSTREAM}/chat/completions").mock(
        return_value=httpx.Response(200, json=completion())
    )
    answer = {"id": "resp_1", "object": "response", "status": "completed", "output": [], "usage": None}
    responses = router.post(f"{UPSTREAM}/responses").mock(return_value=httpx.Response(200, json=answer))
    return router, chat, responses


def nested(depth: int) -> str:
    """JSON text of a string inside ``depth`` arrays (orjson could not write it, which is the point)."""
    return "[" * depth + '"deep"' + "]" * depth


@pytest.mark.parametrize("header", ["accept", "openai-beta"])
def test_a_non_ascii_forwarded_header_is_a_400(tmp_path: Path, redis_url: str, header: str) -> None:
    router, chat, _ = router_answering()
    with gateway_client(tmp_path, redis_url, router) as client:
        answer = client.post(
            "/v1/chat/completions",
            content=orjson.dumps(chat_body()),
            headers={"content-type": "application/json", header: "caf\xe9".encode("latin-1")},
        )
    assert answer.status_code == 400 and answer.json()["error"]["code"] == "invalid_header_value"
    assert not chat.called


@pytest.mark.parametrize(
    "raw",
    [
        '{"model":"gpt-5.4","stream":true,"messages":[{"role":"user","content":"x"}],'
        f'"tools":[{{"type":"function","function":{{"name":"f","parameters":{{"x":{nested(300)}}}}}}}]}}',
        f'{{"model":"small","messages":[{{"role":"user","content":"x","extra":{nested(900)}}}]}}',
    ],
    ids=["stream-without-usage", "model-alias"],
)
def test_json_nested_deeper_than_the_gateway_can_rewrite_is_a_400(
    tmp_path: Path, redis_url: str, raw: str
) -> None:
    router, chat, _ = router_answering()
    with gateway_client(tmp_path, redis_url, router) as client:
        answer = client.post(
            "/v1/chat/completions", content=raw, headers={"content-type": "application/json"}
        )
    assert answer.status_code == 400 and answer.json()["error"]["code"] == "nesting_too_deep"
    assert not chat.called


def test_json_nested_within_the_limit_still_goes_through(tmp_path: Path, redis_url: str) -> None:
    router, chat, _ = router_answering()
    raw = f'{{"model":"small","messages":[{{"role":"user","content":"x","extra":{nested(200)}}}]}}'
    with gateway_client(tmp_path, redis_url, router) as client:
        answer = client.post(
            "/v1/chat/completions", content=raw, headers={"content-type": "application/json"}
        )
    assert answer.status_code == 200
    assert chat.called


def test_control_characters_in_a_response_id_are_a_400(tmp_path: Path, redis_url: str) -> None:
    router, _, _ = router_answering()
    with gateway_client(tmp_path, redis_url, router) as client:
        for path in ("/v1/responses/resp_%00x", "/v1/responses/resp_%0d%0aset-cookie:x", "/v1/responses/%7f"):
            answer = client.get(path)
            assert answer.status_code == 400 and answer.json()["error"]["code"] == "invalid_path"


def test_a_message_item_carrying_a_call_id_before_a_call_is_forwarded(tmp_path: Path, redis_url: str) -> None:
    router, _, responses = router_answering()
    items = [
        {"type": "message", "role": "assistant", "call_id": "call_1", "content": "I will look it up"},
        {"type": "function_call", "call_id": "call_1", "name": "lookup", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_1", "output": "found"},
    ]
    with gateway_client(tmp_path, redis_url, router) as client:
        answer = client.post("/v1/responses", json={"model": "gpt-5.4", "input": items})
    assert answer.status_code == 200 and responses.called


@pytest.mark.parametrize("tenant", ["acme%0d%0aset-cookie:%20x=1", "acme%00", ""])
def test_an_admin_tenant_filter_with_control_characters_is_a_400(
    tmp_path: Path, redis_url: str, tenant: str
) -> None:
    router, _, _ = router_answering()
    with gateway_client(tmp_path, redis_url, router) as client:
        answer = client.get(f"/admin/costs?tenant={tenant}", headers={"authorization": f"Bearer {ADMIN_KEY}"})
    assert answer.status_code == 400 and answer.json()["error"]["param"] == "tenant"


def test_an_admin_tenant_filter_outside_latin_1_is_answered(tmp_path: Path, redis_url: str) -> None:
    router, _, _ = router_answering()
    with gateway_client(tmp_path, redis_url, router) as client:
        answer = client.get("/admin/costs?tenant=%E2%9C%93", headers={"authorization": f"Bearer {ADMIN_KEY}"})
    assert answer.status_code == 200
    assert answer.headers["content-disposition"].startswith('attachment; filename="costs-_-')


@pytest.mark.parametrize("limit", ["²", "٣", "abc", "0", "1001", "-1", "1" * 400])
def test_a_models_limit_that_is_not_1_to_1000_is_anthropics_400(
    tmp_path: Path, redis_url: str, limit: str
) -> None:
    """``"²".isdigit()`` is true and ``int("²")`` raises: it was a 500."""
    router, _, _ = router_answering()
    with gateway_client(tmp_path, redis_url, router) as client:
        answer = client.get(
            "/v1/models", params={"limit": limit}, headers={"anthropic-version": "2023-06-01"}
        )
        fine = client.get("/v1/models", params={"limit": "5"}, headers={"anthropic-version": "2023-06-01"})
    assert answer.status_code == 400, answer.text
    document = answer.json()
    assert document["type"] == "error" and document["error"]["type"] == "invalid_request_error"
    assert document["error"]["message"].startswith("limit: ") and len(document["error"]["message"]) < 200
    assert fine.status_code == 200


def test_a_huge_unknown_model_name_is_echoed_and_logged_truncated(
    tmp_path: Path, redis_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    name = "m" * 4_000_000
    router, chat, _ = router_answering()
    with gateway_client(tmp_path, redis_url, router) as client:
        answer = client.post("/v1/chat/completions", json=chat_body(model=name))
        by_path = client.get(f"/v1/models/{'n' * 20_000}", headers={"anthropic-version": "2023-06-01"})
    assert answer.status_code == 404 and answer.json()["error"]["code"] == "model_not_found"
    message = answer.json()["error"]["message"]
    assert len(message) < 600 and "… (4,000,000 characters)" in message
    assert by_path.status_code == 404 and len(by_path.text) < 600
    logged = capsys.readouterr().out
    assert "m" * 257 not in logged and "m" * 256 in logged
    assert not chat.called


@pytest.mark.parametrize(
    "query",
    [
        "/admin/costs?to=9999-12-31",
        "/admin/costs/summary?to=9999-12-31",
        f"/admin/probes/report?model=gpt-5.4&since={'9' * 400}d",
        f"/admin/experiments/any/report?since={'9' * 400}d",
    ],
)
def test_admin_periods_out_of_range_are_a_400(tmp_path: Path, redis_url: str, query: str) -> None:
    """A day after 9999-12-31 and a duration longer than time overflowed into a 500."""
    router, _, _ = router_answering()
    with gateway_client(tmp_path, redis_url, router) as client:
        answer = client.get(query, headers={"authorization": f"Bearer {ADMIN_KEY}"})
    assert answer.status_code == 400, answer.text
    assert len(answer.text) < 500
