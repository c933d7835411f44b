"""A policy's ``reject``: 403 below the warning line, 400 at or above it, logged and counted as ``reject``
with the prompt's tokens, the policy and the band."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
import respx
from structlog.testing import capture_logs

from tests.factories import UPSTREAM, completion, gateway_client, make_config
from tests.fixtures.haystack import ProseGenerator
from tests.gateway.test_metrics import scrape, value


def closed_config() -> dict[str, Any]:
    """gpt-5.2 with its warning line at 1,000 tokens and cliff at 2,000; the policy rejects every band."""
    config = make_config()
    config["policies"] = {
        "bands": {"gpt-5.2": {"cliff_tokens": 2000, "warning_tokens": 1000}},
        "default": {
            "name": "closed",
            "actions": {name: "reject" for name in ("below_warning", "warning", "over_cliff", "over_window")},
        },
    }
    return config


def body_of(words: int) -> dict[str, Any]:
    text = " ".join(ProseGenerator(7).sentence() for _ in range(words // 12 + 1))
    return {"model": "gpt-5.2", "messages": [{"role": "user", "content": text}]}


@pytest.mark.parametrize(
    ("words", "status", "code", "band"),
    [
        (20, 403, "policy_rejected", "below_warning"),
        (1200, 400, "context_length_exceeded", "warning"),
        (3000, 400, "context_length_exceeded", "over_cliff"),
    ],
)
def test_a_rejection_is_answered_logged_and_counted_as_reject(
    tmp_path: Path, redis_url: str, words: int, status: int, code: str, band: str
) -> None:
    router = respx.Router(assert_all_called=False)
    route = router.post(f"{UPSTREAM}/chat/completions").mock(
        return_value=httpx.Response(200, json=completion())
    )
    with gateway_client(tmp_path, redis_url, router, config=closed_config()) as client:
        with capture_logs() as logs:
            response = client.post("/v1/chat/completions", json=body_of(words))
        samples = scrape(client)
    assert (response.status_code, response.json()["error"]["code"]) == (status, code)
    assert route.call_count == 0
    (line,) = [entry for entry in logs if entry["event"] == "request"]
    assert (line["action"], line["policy"], line["band"], line["status"]) == (
        "reject",
        "closed",
        band,
        status,
    )
    assert line["prompt_tokens"] is not None and line["prompt_tokens"] > 0
    assert str(line["prompt_tokens"]) in response.json()["error"]["message"]
    labels = {"endpoint": "chat", "model": "gpt-5.2", "action": "reject", "status": str(status)}
    assert value(samples, "gateway_requests_total", **labels) == 1
