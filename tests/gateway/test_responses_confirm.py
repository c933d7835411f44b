"""A Responses count near a line, confirmed with the provider's ``POST /responses/input_tokens``."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import orjson
import respx

from gateway.fronts.responses.confirm import counting_body
from gateway.fronts.responses.counting import count_responses
from tests.factories import TENANT_KEY, UPSTREAM, gateway_client, make_config, shared_counter
from tests.mock.responses import responses_answer

BODY = {
    "model": "gpt-5.2",
    "input": [{"type": "message", "role": "user", "content": "Summarise the deploy log, please."}],
    "instructions": "You are terse.",
    "stream": False,
    "store": True,
    "metadata": {"run": "7"},
}


def local_count() -> int:
    return count_responses(shared_counter(), "gpt-5.2", BODY).total


def config_near_the_line(
    tenant: str, *, offered: bool = True, margin: int = 200, allow_unknown: bool = False
) -> dict[str, Any]:
    """Bands placed so that BODY counts 100 tokens below the warning line. ``allow_unknown``: the tenant
    may chain onto responses the gateway never saw it create."""
    config = make_config(tenants={tenant: {"keys": [TENANT_KEY], "allow_unknown_responses": allow_unknown}})
    config["providers"]["mock"]["responses_input_tokens"] = offered
    config["providers"]["mock"]["input_tokens_timeout"] = 0.5
    warning = local_count() + 100
    config["policies"] = {
        "bands": {"gpt-5.2": {"warning_tokens": warning, "cliff_tokens": warning + 5_000}},
        "default": {"name": "default", "actions": {"warning": "forward"}, "confirm_within_tokens": margin},
    }
    return config


def subdir(path: Path, name: str) -> Path:
    (path / name).mkdir()
    return path / name


LATE: list[httpx.Request] = []


async def too_late(request: httpx.Request) -> httpx.Response:
    LATE.append(request)
    await asyncio.sleep(5)
    return httpx.Response(200, json={"input_tokens": 10**6})


def router_counting(answer: Any) -> tuple[respx.Router, respx.Route]:
    router = respx.Router(assert_all_called=False)
    router.post(f"{UPSTREAM}/responses").mock(
        side_effect=lambda request: httpx.Response(
            200, json=responses_answer(orjson.loads(request.content), number=1)
        )
    )
    counts = router.post(f"{UPSTREAM}/responses/input_tokens")
    if isinstance(answer, Exception) or callable(answer):
        counts.mock(side_effect=answer)
    else:
        counts.mock(return_value=answer)
    return router, counts


def test_counting_body_keeps_what_the_count_endpoint_takes() -> None:
    sent = orjson.loads(counting_body({**BODY, "previous_response_id": "resp_1", "tools": []}, "gpt-5.2-x"))
    assert sent == {
        "model": "gpt-5.2-x",
        "input": BODY["input"],
        "instructions": "You are terse.",
        "tools": [],
        "previous_response_id": "resp_1",
    }


def test_a_count_near_the_warning_line_is_decided_on_the_providers_count(
    tmp_path: Path, redis_url: str, tenant_name: str
) -> None:
    over = local_count() + 150  # the provider frames the prompt with 150 more tokens: past the line
    router, counts = router_counting(httpx.Response(200, json={"input_tokens": over}))
    with gateway_client(tmp_path, redis_url, router, config=config_near_the_line(tenant_name)) as client:
        response = client.post("/v1/responses", json=BODY)
    assert response.status_code == 200
    assert response.headers["x-gateway-confirmed-tokens"] == str(over)
    assert response.headers["x-gateway-prompt-tokens"] == str(local_count())
    assert "warning line" in response.headers["x-gateway-warning"]
    sent = orjson.loads(counts.calls.last.request.content)
    assert sent["input"] == BODY["input"] and "stream" not in sent and "metadata" not in sent


def test_a_count_far_from_the_lines_or_a_provider_without_the_endpoint_is_not_confirmed(
    tmp_path: Path, redis_url: str, tenant_name: str
) -> None:
    router, counts = router_counting(httpx.Response(200, json={"input_tokens": 10**6}))
    far = config_near_the_line(tenant_name, margin=50)
    with gateway_client(tmp_path, redis_url, router, config=far) as client:
        beyond_margin = client.post("/v1/responses", json=BODY)
    not_offered = config_near_the_line(tenant_name, offered=False)
    with gateway_client(subdir(tmp_path, "off"), redis_url, router, config=not_offered) as client:
        without_endpoint = client.post("/v1/responses", json=BODY)
    assert not counts.called
    for response in (beyond_margin, without_endpoint):
        assert response.status_code == 200
        assert "x-gateway-confirmed-tokens" not in response.headers
        assert "x-gateway-warning" not in response.headers


def test_a_provider_count_that_fails_or_is_slow_leaves_the_gateways_count_in_charge(
    tmp_path: Path, redis_url: str, tenant_name: str
) -> None:
    for answer in (
        httpx.Response(500, json={"error": {"message": "busy"}}),
        httpx.Response(200, json={"input_tokens": "many"}),
        httpx.ConnectError("refused"),
        too_late,
    ):
        router, counts = router_counting(answer)
        config = config_near_the_line(tenant_name)
        with gateway_client(subdir(tmp_path, str(id(answer))), redis_url, router, config=config) as client:
            response = client.post("/v1/responses", json=BODY)
        assert counts.called or (answer is too_late and LATE)
        assert response.status_code == 200, answer
        assert "x-gateway-confirmed-tokens" not in response.headers
        assert "x-gateway-warning" not in response.headers


def test_an_unknown_stored_history_is_counted_by_the_provider_and_can_be_rejected(
    tmp_path: Path, redis_url: str, tenant_name: str
) -> None:
    """The gateway never saw ``resp_elsewhere``: only the provider knows how large its history is. Over
    the cliff, stored history cannot be cut: the policy's ``on_exhausted`` decides (here: reject)."""
    router, counts = router_counting(httpx.Response(200, json={"input_tokens": local_count() + 9_000}))
    chained = {**BODY, "previous_response_id": "resp_elsewhere"}
    config = config_near_the_line(tenant_name, margin=1, allow_unknown=True)
    config["policies"]["default"]["on_exhausted"] = "reject"
    with gateway_client(tmp_path, redis_url, router, config=config) as client:
        response = client.post("/v1/responses", json=chained)
    assert orjson.loads(counts.calls.last.request.content)["previous_response_id"] == "resp_elsewhere"
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "context_length_exceeded" and "resp_elsewhere" in error["message"]


def test_an_unknown_stored_history_counted_by_the_provider_is_warned_with_that_count(
    tmp_path: Path, redis_url: str, tenant_name: str
) -> None:
    counted = local_count() + 200  # past the warning line, under the cliff
    router, _ = router_counting(httpx.Response(200, json={"input_tokens": counted}))
    chained = {**BODY, "previous_response_id": "resp_elsewhere"}
    config = config_near_the_line(tenant_name, margin=1, allow_unknown=True)
    with gateway_client(tmp_path, redis_url, router, config=config) as client:
        response = client.post("/v1/responses", json=chained)
    assert response.status_code == 200
    assert response.headers["x-gateway-confirmed-tokens"] == str(counted)
    warning = response.headers["x-gateway-warning"]
    assert f"{counted} input tokens with this turn, as the provider counts them" in warning
    assert "unknown to the gateway" not in warning
