"""Errors on the Messages routes in Anthropic's shape, and what goes upstream to an Anthropic provider."""

from __future__ import annotations

import orjson
import pytest
from starlette.requests import Request

from gateway.base.errors import (
    AuthenticationFailed,
    BudgetExceeded,
    ContextLengthExceeded,
    GatewayError,
    InvalidRequest,
    UpstreamExhausted,
    UpstreamRejected,
)
from gateway.config.schema.root import ProviderConfig
from gateway.fronts.messages.errors import error_type, render
from gateway.upstream.headers import upstream_headers


def request_with_id(request_id: str | None = "req_abc") -> Request:
    request = Request({"type": "http", "method": "POST", "path": "/v1/messages", "headers": [], "state": {}})
    if request_id is not None:
        request.state.request_id = request_id
        request.state.client_request_id = None
    return request


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (400, "invalid_request_error"),
        (401, "authentication_error"),
        (403, "permission_error"),
        (404, "not_found_error"),
        (405, "invalid_request_error"),
        (413, "request_too_large"),
        (429, "rate_limit_error"),
        (500, "api_error"),
        (502, "api_error"),
        (503, "api_error"),
        (529, "overloaded_error"),
    ],
)
def test_error_type_follows_anthropics_table(status: int, kind: str) -> None:
    assert error_type(status) == kind


@pytest.mark.parametrize(
    ("error", "status", "kind"),
    [
        (AuthenticationFailed("Incorrect API key provided."), 401, "authentication_error"),
        (BudgetExceeded("The monthly budget of $1 is spent."), 429, "rate_limit_error"),
        (
            InvalidRequest("max_tokens: must be a positive integer", param="max_tokens"),
            400,
            "invalid_request_error",
        ),
        (GatewayError("The gateway failed unexpectedly; see its logs."), 500, "api_error"),
    ],
)
def test_render_gives_anthropics_shape_with_the_request_id(
    error: GatewayError, status: int, kind: str
) -> None:
    response = render(request_with_id(), error)
    body = orjson.loads(response.body)
    assert response.status_code == status
    assert body["type"] == "error" and body["request_id"] == "req_abc"
    assert body["error"]["type"] == kind
    assert error.message in body["error"]["message"]
    assert set(body["error"]) == {"type", "message"}
    assert response.headers["request-id"] == response.headers["x-gateway-request-id"] == "req_abc"


def test_render_keeps_the_gateways_code_in_the_message() -> None:
    body = orjson.loads(render(request_with_id(), BudgetExceeded("Spent.")).body)
    assert body["error"]["message"] == "budget_exceeded: Spent."


def test_render_says_prompt_is_too_long_over_the_window() -> None:
    error = ContextLengthExceeded("The prompt has 1,200,000 tokens; the context window is 1,000,000.")
    body = orjson.loads(render(request_with_id(), error).body)
    assert body["error"]["message"].startswith("prompt is too long: The prompt has 1,200,000 tokens")


@pytest.mark.parametrize("status", [400, 429, 529])
def test_render_passes_the_upstreams_answer_through(status: int) -> None:
    upstream = orjson.dumps(
        {
            "type": "error",
            "error": {"type": "overloaded_error", "message": "Overloaded"},
            "request_id": "req_up",
        }
    )
    rejected = UpstreamRejected(status, upstream, "application/json")
    for error in (rejected, UpstreamExhausted("all attempts failed", [], rejected)):
        response = render(request_with_id(), error)
        assert response.status_code == status
        assert response.body == upstream


def test_render_without_a_request_id() -> None:
    response = render(request_with_id(None), InvalidRequest("bad"))
    assert orjson.loads(response.body)["request_id"] is None
    assert "request-id" not in response.headers


def anthropic_provider(**overrides: object) -> ProviderConfig:
    return ProviderConfig.model_validate(
        {
            "base_url": "https://api.anthropic.test/v1",
            "api_key": "sk-ant-provider",
            "kind": "anthropic",
            **overrides,
        }
    )


def test_upstream_headers_send_the_providers_key_as_x_api_key_and_never_the_clients() -> None:
    incoming = {
        "x-api-key": "sk-tenant",
        "authorization": "Bearer sk-tenant",
        "anthropic-version": "2023-06-01",
        "anthropic-beta": "interleaved-thinking-2025-05-14,fine-grained-tool-streaming-2025-05-14",
        "openai-beta": "responses=v1",
        "x-stainless-helper-method": "stream",
    }
    headers = upstream_headers(anthropic_provider(), incoming)
    assert headers["x-api-key"] == "sk-ant-provider"
    assert "authorization" not in headers
    assert headers["anthropic-version"] == "2023-06-01"
    assert headers["anthropic-beta"] == incoming["anthropic-beta"]  # unchanged, commas and all
    assert "openai-beta" not in headers and "x-stainless-helper-method" not in headers
    assert "sk-tenant" not in orjson.dumps(headers).decode()


def test_upstream_headers_name_a_version_when_the_client_sends_none() -> None:
    headers = upstream_headers(anthropic_provider(headers={"x-team": "infra"}), {})
    assert headers["anthropic-version"] == "2023-06-01"
    assert headers["x-team"] == "infra"
    assert "anthropic-beta" not in headers


def test_upstream_headers_of_an_openai_provider_are_unchanged() -> None:
    provider = ProviderConfig.model_validate({"base_url": "https://api.openai.test/v1", "api_key": "sk-oai"})
    headers = upstream_headers(provider, {"anthropic-version": "2023-06-01", "x-api-key": "sk-tenant"})
    assert headers["authorization"] == "Bearer sk-oai"
    assert "x-api-key" not in headers and "anthropic-version" not in headers


def test_upstream_headers_refuse_a_beta_header_that_is_not_ascii() -> None:
    with pytest.raises(InvalidRequest) as caught:
        upstream_headers(anthropic_provider(), {"anthropic-beta": "caf\u00e9"})
    assert caught.value.param == "anthropic-beta"
