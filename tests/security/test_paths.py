"""Attack: reach a controlled route through the catch-all passthrough with dot segments or escapes, or
reach any path on the provider host with the provider's key.

Paths are checked once at the edge (no dot segments, no encoded separators), and the passthrough forwards
only what the config lists, held and metered like any other call.
"""

from __future__ import annotations

import http.client
from typing import Any
from urllib.parse import urlparse

import httpx
import orjson
import pytest

from tests.security.conftest import Tenants, seen
from tests.security.test_request_ids import events

pytestmark = pytest.mark.e2e

CHAT = {"model": "gpt-5.4", "messages": [{"role": "user", "content": "hi"}]}


def raw_post(gateway: str, path: str, body: dict[str, Any], role: str = "victim") -> tuple[int, Any]:
    """A POST whose path goes out exactly as written (httpx and the SDK would remove the dot segments)."""
    address = urlparse(gateway)
    connection = http.client.HTTPConnection(address.hostname or "127.0.0.1", address.port, timeout=30)
    try:
        headers = {"authorization": f"Bearer {Tenants.key(role)}", "content-type": "application/json"}
        connection.request("POST", path, body=orjson.dumps(body), headers=headers)
        response = connection.getresponse()
        return response.status, orjson.loads(response.read())
    finally:
        connection.close()


@pytest.mark.parametrize(
    "path",
    [
        "/v1/x/../chat/completions",
        "/v1/x/%2e%2e/chat/completions",
        "/v1/x/%2E%2E/chat/completions",
        "/v1/x/..%2fchat/completions",
        "/v1/chat%2fcompletions",
        "/v1/x/%252e%252e/chat/completions",
        "/v1/x/.%2e/chat/completions",
        "/v1/x\\..\\chat/completions",
        "/v1/./chat/completions",
        "/v1/moderations%3fsneaky=1",
    ],
)
def test_a_path_that_hides_its_meaning_is_refused_and_never_forwarded(
    security_gateway: str, upstream: httpx.Client, path: str
) -> None:
    status, body = raw_post(security_gateway, path, CHAT)
    assert status == 400 and body["error"]["code"] == "invalid_path"
    assert seen(upstream) == []


def test_duplicate_slashes_route_the_normalised_path_through_every_control(
    security_gateway: str, upstream: httpx.Client
) -> None:
    status, body = raw_post(security_gateway, "//v1//chat/completions/", CHAT)
    assert status == 200 and body["object"] == "chat.completion"
    assert [request["path"] for request in seen(upstream)] == ["/v1/chat/completions"]


def test_paths_the_passthrough_list_does_not_name_are_never_forwarded(
    security_gateway: str, upstream: httpx.Client
) -> None:
    status, body = raw_post(security_gateway, "/v1/completions", {"model": "gpt-5.4", "prompt": "x"})
    assert status == 404 and body["error"]["code"] == "unknown_url"
    status, body = raw_post(security_gateway, "/v1/admin/keys", {"model": "gpt-5.4"})
    assert status == 404
    assert seen(upstream) == []


def test_shared_provider_objects_are_only_for_the_tenants_granted_them(
    security_gateway: str, upstream: httpx.Client
) -> None:
    headers = {"authorization": f"Bearer {Tenants.key('attacker')}"}
    refused = httpx.get(f"{security_gateway}/v1/files", headers=headers, timeout=10)
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "passthrough_not_granted"
    assert seen(upstream) == []


def test_a_listed_passthrough_call_is_metered_and_sends_the_configured_organization(
    security_gateway: str, upstream: httpx.Client, tenants: Tenants
) -> None:
    headers = {
        "authorization": f"Bearer {Tenants.key('granted')}",
        "openai-organization": "org-chosen-by-the-client",
        "openai-project": "proj-chosen-by-the-client",
    }
    answer = httpx.post(
        f"{security_gateway}/v1/moderations",
        json={"model": "gpt-5.4", "input": "hello"},
        headers=headers,
        timeout=10,
    )
    assert answer.status_code == 200 and answer.json()["id"] == "modr-mock"
    [request] = seen(upstream)
    assert request["path"] == "/v1/moderations"
    assert request["headers"]["openai-organization"] == "org-configured"
    assert "openai-project" not in request["headers"]
    request_id = answer.headers["x-gateway-request-id"]
    stored = [
        event
        for event in events(security_gateway, tenants.name("granted"), {request_id})
        if event["id"] == request_id
    ]
    assert len(stored) == 1 and stored[0]["model"] == "gpt-5.4"
