"""A Messages count is an estimate (Claude's tokenizer is not public, o200k stands in): within the policy's
``confirm_within_ratio`` of a line it is confirmed with the provider's ``count_tokens``, and when no count
comes back it is decided at the top of its error band, so that an undercount never crosses a price line."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import httpx
import pytest
import respx

from gateway.fronts.messages.counting import count_prompt
from tests.factories import gateway_client, shared_counter
from tests.fixtures.haystack import ProseGenerator
from tests.gateway.test_messages_pipeline import (
    ANTHROPIC_HEADERS,
    CLAUDE,
    Upstream,
    config,
    create_body,
    tenant,
)

__all__ = ["tenant"]  # the fixture, shared

MODEL = "claude-sonnet-4-5"


def long_body() -> tuple[dict[str, Any], int]:
    """A request of a few thousand tokens, and the gateway's estimate of it."""
    prose = ProseGenerator(11)
    text = " ".join(prose.sentence() for _ in range(200))
    body = create_body(messages=[{"role": "user", "content": [{"type": "text", "text": text}]}])
    return body, count_prompt(shared_counter(), MODEL, body).total


def settings(
    tenant: str, estimate: int, *, offered: bool, ratio: float = 0.2, gap: int = 100
) -> dict[str, Any]:
    """Its warning line ``gap`` tokens above the estimate, the cliff twice as far; the warning band
    forwarded, over the cliff rejected (so the band decided on shows in the answer)."""
    found = config(tenant, messages_count_tokens=offered)
    found["policies"] = {
        "bands": {MODEL: {"warning_tokens": estimate + gap, "cliff_tokens": estimate + 2 * gap}},
        "default": {
            "name": "default",
            "actions": {"warning": "forward", "over_cliff": "reject"},
            "confirm_within_tokens": 0,
            "confirm_within_ratio": ratio,
        },
    }
    return found


def send(
    tmp_path: Path, redis_url: str, settings: dict[str, Any], body: dict[str, Any], count: httpx.Response
) -> tuple[httpx.Response, respx.Route]:
    router = respx.Router(assert_all_called=False)
    router.post(f"{CLAUDE}/messages").mock(side_effect=Upstream().messages)
    counts = router.post(f"{CLAUDE}/messages/count_tokens").mock(return_value=count)
    with gateway_client(tmp_path, redis_url, router, config=settings) as client:
        response = client.post("/v1/messages", json=body, headers=ANTHROPIC_HEADERS)
    return response, counts


@pytest.mark.parametrize(
    ("offered", "answer"),
    [(False, httpx.Response(200, json={"input_tokens": 1})), (True, httpx.Response(500, json={}))],
)
def test_an_unconfirmed_estimate_near_the_cliff_is_decided_at_the_top_of_its_band(
    tmp_path: Path, redis_url: str, tenant: str, offered: bool, answer: httpx.Response
) -> None:
    body, estimate = long_body()
    assert estimate > 2_000  # its 20% reaches past both lines, 100 and 200 tokens above it
    response, counts = send(tmp_path, redis_url, settings(tenant, estimate, offered=offered), body, answer)
    assert counts.call_count == (1 if offered else 0)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    top = estimate + math.ceil(0.2 * estimate)
    assert f"price cliff is {estimate + 200} tokens" in error["message"]
    assert f"resulted in {top} tokens" in error["message"]


def test_a_confirmed_estimate_is_decided_on_the_providers_count(
    tmp_path: Path, redis_url: str, tenant: str
) -> None:
    body, estimate = long_body()
    answer = httpx.Response(200, json={"input_tokens": estimate + 150})  # in the warning band
    response, counts = send(tmp_path, redis_url, settings(tenant, estimate, offered=True), body, answer)
    assert counts.call_count == 1
    assert response.status_code == 200, response.text
    assert response.headers["x-gateway-confirmed-tokens"] == str(estimate + 150)
    assert response.headers["x-gateway-action"] == "forward"
    assert "warning line" in response.headers["x-gateway-warning"]


def test_an_unconfirmed_estimate_moved_to_another_band_says_so(
    tmp_path: Path, redis_url: str, tenant: str
) -> None:
    body, estimate = long_body()
    far = settings(tenant, estimate, offered=False, gap=estimate // 10)  # the warning line within 20%
    far["policies"]["bands"][MODEL]["cliff_tokens"] = 3 * estimate
    response, _ = send(tmp_path, redis_url, far, body, httpx.Response(500, json={}))
    assert response.status_code == 200 and response.headers["x-gateway-action"] == "forward"
    top = estimate + math.ceil(0.2 * estimate)
    assert (
        f"input tokens estimated at {estimate}, unconfirmed by the provider: decided as {top} "
        "(confirm_within_ratio 0.2)"
    ) in response.headers["x-gateway-warning"]
    assert response.headers["x-gateway-forwarded-tokens"] == str(estimate)


def test_without_the_ratio_the_estimate_is_taken_as_it_is(
    tmp_path: Path, redis_url: str, tenant: str
) -> None:
    body, estimate = long_body()
    no_count = httpx.Response(500, json={})
    response, counts = send(
        tmp_path, redis_url, settings(tenant, estimate, offered=True, ratio=0), body, no_count
    )
    assert counts.call_count == 0
    assert response.status_code == 200, response.text
    assert response.headers["x-gateway-action"] == "forward"
    assert "x-gateway-warning" not in response.headers


def test_an_estimate_far_from_any_line_is_not_confirmed(tmp_path: Path, redis_url: str, tenant: str) -> None:
    body, estimate = long_body()
    far = settings(tenant, estimate, offered=True, gap=estimate)  # lines at 2x and 3x the estimate
    response, counts = send(tmp_path, redis_url, far, body, httpx.Response(200, json={"input_tokens": 1}))
    assert counts.call_count == 0
    assert response.status_code == 200 and response.headers["x-gateway-action"] == "forward"
    assert "x-gateway-confirmed-tokens" not in response.headers
