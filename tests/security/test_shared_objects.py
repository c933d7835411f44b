"""Attack: name another tenant's provider objects inside a request body.

The provider keeps files, vector stores, stored prompts, containers and the items of stored responses for
its whole account, and every tenant reaches it through the same key. A body naming one by id is refused
(403 ``shared_objects_not_granted``, in its front's shape) unless the tenant holds the grant for that kind:
``tenants.<name>.shared_objects``, or a passthrough entry granting it the kind's path. Nothing refused
reaches the provider.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
import respx

from tests.factories import OTHER_KEY, TENANT_KEY, UPSTREAM, completion, gateway_client, make_config

CLAUDE = "https://api.anthropic.test/v1"
ANTHROPIC = {"authorization": "", "x-api-key": TENANT_KEY, "anthropic-version": "2023-06-01"}
RESPONSE = {"id": "resp_1", "object": "response", "status": "completed", "output": [], "usage": None}
MESSAGE = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-x",
    "content": [{"type": "text", "text": "ok"}],
    "stop_reason": "end_turn",
    "usage": {"input_tokens": 5, "output_tokens": 1},
}


def config(**granted: Any) -> dict[str, Any]:
    """``acme`` (the default key) holds no grant; ``globex`` holds ``granted`` (tenant fields)."""
    base = make_config(
        tenants={"acme": {"keys": [TENANT_KEY]}, "globex": {"keys": [OTHER_KEY], **granted}},
    )
    base["providers"]["claude"] = {"base_url": CLAUDE, "api_key": "sk-ant", "kind": "anthropic"}
    base["models"]["claude-x"] = {"provider": "claude", "context_window": 200_000}
    return base


def upstream() -> tuple[respx.Router, list[respx.Route]]:
    router = respx.Router(assert_all_called=False)
    routes = [
        router.post(f"{UPSTREAM}/chat/completions").mock(return_value=httpx.Response(200, json=completion())),
        router.post(f"{UPSTREAM}/responses").mock(return_value=httpx.Response(200, json=RESPONSE)),
        router.post(f"{UPSTREAM}/responses/input_tokens").mock(
            return_value=httpx.Response(200, json={"object": "response.input_tokens", "input_tokens": 3})
        ),
        router.post(f"{CLAUDE}/messages").mock(return_value=httpx.Response(200, json=MESSAGE)),
        router.post(f"{CLAUDE}/messages/count_tokens").mock(
            return_value=httpx.Response(200, json={"input_tokens": 3})
        ),
    ]
    return router, routes


def chat(*parts: dict[str, Any]) -> dict[str, Any]:
    return {
        "model": "gpt-5.4",
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}, *parts]}],
    }


def responses(**fields: Any) -> dict[str, Any]:
    return {"model": "gpt-5.4", "input": "hi", **fields}


def user_input(*parts: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"role": "user", "content": [{"type": "input_text", "text": "hi"}, *parts]}]


def messages(*blocks: dict[str, Any], **fields: Any) -> dict[str, Any]:
    content = [{"type": "text", "text": "hi"}, *blocks]
    return {
        "model": "claude-x",
        "max_tokens": 100,
        "messages": [{"role": "user", "content": content}],
        **fields,
    }


FILE_SOURCE = {"type": "file", "file_id": "file_011victim"}

CASES: list[tuple[str, dict[str, Any], str, str]] = [
    ("/v1/chat/completions", chat({"type": "file", "file": {"file_id": "file-victim"}}), "files",
     "messages[0].content[1].file.file_id"),
    ("/v1/responses", responses(input=user_input({"type": "input_file", "file_id": "file-victim"})), "files",
     "input[0].content[1].file_id"),
    ("/v1/responses", responses(input=user_input({"type": "input_image", "file_id": "file-victim"})), "files",
     "input[0].content[1].file_id"),
    ("/v1/responses", responses(input=[{"type": "item_reference", "id": "msg_victim"}]), "response_items",
     "input[0].id"),
    ("/v1/responses", responses(input=[{"type": "function_call_output", "call_id": "c",
                                        "output": [{"type": "input_file", "file_id": "file-victim"}]}]),
     "files", "input[0].output[0].file_id"),
    ("/v1/responses", responses(tools=[{"type": "file_search", "vector_store_ids": ["vs_victim"]}]),
     "vector_stores", "tools[0].vector_store_ids[0]"),
    ("/v1/responses", responses(tools=[{"type": "code_interpreter", "container": "cntr_victim"}]),
     "containers", "tools[0].container"),
    ("/v1/responses", responses(tools=[{"type": "code_interpreter",
                                        "container": {"type": "auto", "file_ids": ["file-victim"]}}]),
     "files", "tools[0].container.file_ids[0]"),
    ("/v1/responses", responses(prompt={"id": "pmpt_victim"}), "prompts", "prompt.id"),
    ("/v1/responses", responses(conversation="conv_victim"), "conversations", "conversation"),
    ("/v1/responses/input_tokens",
     responses(input=user_input({"type": "input_file", "file_id": "file-victim"})),
     "files", "input[0].content[1].file_id"),
]  # fmt: skip

MESSAGES_CASES: list[tuple[str, dict[str, Any], str]] = [
    ("/v1/messages", messages({"type": "document", "source": FILE_SOURCE}),
     "messages[0].content[1].source.file_id"),
    ("/v1/messages", messages({"type": "image", "source": FILE_SOURCE}),
     "messages[0].content[1].source.file_id"),
    ("/v1/messages", messages({"type": "container_upload", "file_id": "file_011victim"}),
     "messages[0].content[1].file_id"),
    ("/v1/messages", messages({"type": "tool_result", "tool_use_id": "t",
                               "content": [{"type": "document", "source": FILE_SOURCE}]}),
     "messages[0].content[1].content[0].source.file_id"),
    ("/v1/messages", messages(container="container_victim"), "container"),
    ("/v1/messages", messages(container={"skills": [{"type": "custom", "skill_id": "skill_victim"}]}),
     "container.skills[0].skill_id"),
    ("/v1/messages/count_tokens", messages({"type": "document", "source": FILE_SOURCE}),
     "messages[0].content[1].source.file_id"),
]  # fmt: skip


@pytest.mark.parametrize(("path", "body", "kind", "param"), CASES)
def test_an_openai_body_naming_a_shared_object_is_refused_without_the_grant(
    tmp_path: Path, redis_url: str, path: str, body: dict[str, Any], kind: str, param: str
) -> None:
    router, routes = upstream()
    with gateway_client(tmp_path, redis_url, router, config=config()) as client:
        answer = client.post(path, json=body)
    assert answer.status_code == 403, answer.text
    error = answer.json()["error"]
    assert (error["type"], error["code"], error["param"]) == (
        "permission_error",
        "shared_objects_not_granted",
        param,
    )
    assert f"not granted {kind}" in error["message"] and "victim" in error["message"]
    assert not any(route.called for route in routes)


@pytest.mark.parametrize(("path", "body", "param"), MESSAGES_CASES)
def test_a_messages_body_naming_a_shared_object_is_refused_in_anthropics_shape(
    tmp_path: Path, redis_url: str, path: str, body: dict[str, Any], param: str
) -> None:
    router, routes = upstream()
    with gateway_client(tmp_path, redis_url, router, config=config()) as client:
        answer = client.post(path, json=body, headers=ANTHROPIC)
    assert answer.status_code == 403, answer.text
    document = answer.json()
    assert document["type"] == "error" and document["error"]["type"] == "permission_error"
    assert document["error"]["message"].startswith(f"shared_objects_not_granted: {param} names the ")
    assert not any(route.called for route in routes)


def test_a_tenant_holding_the_grant_names_the_objects_of_that_kind_only(
    tmp_path: Path, redis_url: str
) -> None:
    router, routes = upstream()
    globex = {"authorization": f"Bearer {OTHER_KEY}"}
    file_part = user_input({"type": "input_file", "file_id": "file-mine"})
    store = [{"type": "file_search", "vector_store_ids": ["vs_mine"]}]
    with gateway_client(tmp_path, redis_url, router, config=config(shared_objects=["files"])) as client:
        with_file = client.post("/v1/responses", json=responses(input=file_part), headers=globex)
        with_chat_file = client.post(
            "/v1/chat/completions", json=chat({"type": "file", "file": {"file_id": "f"}}), headers=globex
        )
        with_store = client.post("/v1/responses", json=responses(tools=store), headers=globex)
        by_acme = client.post("/v1/responses", json=responses(input=file_part))
    assert with_file.status_code == 200 and with_chat_file.status_code == 200
    assert (
        with_store.status_code == 403 and "not granted vector_stores" in with_store.json()["error"]["message"]
    )
    assert by_acme.status_code == 403
    assert routes[0].call_count == 1 and routes[1].call_count == 1


def test_a_passthrough_grant_of_the_kinds_path_grants_the_kind(tmp_path: Path, redis_url: str) -> None:
    """A tenant that may list and read the account's files through the passthrough may name one."""
    router, routes = upstream()
    base = config()
    base["passthrough"] = [{"path": "/files/**", "methods": ["GET", "POST"], "tenants": ["globex"]}]
    document = messages({"type": "document", "source": FILE_SOURCE})
    with gateway_client(tmp_path, redis_url, router, config=base) as client:
        granted = client.post("/v1/messages", json=document, headers={**ANTHROPIC, "x-api-key": OTHER_KEY})
        refused = client.post("/v1/messages", json=document, headers=ANTHROPIC)
    assert granted.status_code == 200 and refused.status_code == 403
    assert routes[3].call_count == 1


def test_a_huge_id_is_not_echoed_whole(tmp_path: Path, redis_url: str) -> None:
    router, _ = upstream()
    huge = "file-" + "x" * 2_000_000
    with gateway_client(tmp_path, redis_url, router, config=config()) as client:
        answer = client.post(
            "/v1/responses", json=responses(input=user_input({"type": "input_file", "file_id": huge}))
        )
    assert answer.status_code == 403 and len(answer.content) < 1_000
    assert "… (2,000,005 characters)" in answer.json()["error"]["message"]


def test_bodies_naming_nothing_shared_go_through(tmp_path: Path, redis_url: str) -> None:
    """Inline files and images, URLs and plain text are the tenant's own: no grant needed."""
    router, _ = upstream()
    inline = {
        "type": "file",
        "file": {"file_data": "data:application/pdf;base64,JVBERi0=", "filename": "a.pdf"},
    }
    with gateway_client(tmp_path, redis_url, router, config=config()) as client:
        plain = client.post("/v1/chat/completions", json=chat(inline))
        url = client.post(
            "/v1/responses",
            json=responses(
                input=user_input({"type": "input_file", "file_url": "https://example.test/a.pdf"})
            ),
        )
        base64 = client.post(
            "/v1/messages",
            json=messages({"type": "document", "source": {"type": "base64", "media_type": "application/pdf",
                                                          "data": "JVBERi0="}}),
            headers=ANTHROPIC,
        )  # fmt: skip
    assert (plain.status_code, url.status_code, base64.status_code) == (200, 200, 200)


def test_a_grant_of_prompts_does_not_grant_the_files_among_its_variables(
    tmp_path: Path, redis_url: str
) -> None:
    router, routes = upstream()
    globex = {"authorization": f"Bearer {OTHER_KEY}"}
    variables = {"doc": {"type": "input_file", "file_id": "file-victim"}, "name": "plain text"}
    with gateway_client(tmp_path, redis_url, router, config=config(shared_objects=["prompts"])) as client:
        alone = client.post("/v1/responses", json=responses(prompt={"id": "pmpt_1"}), headers=globex)
        with_file = client.post(
            "/v1/responses", json=responses(prompt={"id": "pmpt_1", "variables": variables}), headers=globex
        )
    assert alone.status_code == 200
    assert with_file.status_code == 403
    assert with_file.json()["error"]["param"] == "prompt.variables.doc.file_id"
    assert routes[1].call_count == 1
