"""Attack: a body small in bytes but large in tokens, decided on its byte size and sent over the cliff.

70,000 ``{}`` items are 210 KB and 350,003 tokens; the Responses bound (``gateway.fronts.responses.counting``)
is proven for every item shape, so such a body is counted exactly and meets its real band.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import respx

from tests.factories import UPSTREAM, completion, gateway_client, make_config
from tests.gateway.test_responses_bound import repeated


def test_responses_pipeline_counts_the_reported_body_exactly(tmp_path: Path, redis_url: str) -> None:
    """70,000 ``{}`` items are 350,003 tokens, over the cliff: the policy's action there (retrieve, which
    has no document to cut; then ``on_exhausted``, here ``reject``: 400 ``context_length_exceeded``, since
    the same request would fail the same way again), not a forward decided on the byte size."""
    router = respx.Router(assert_all_called=False)
    forwarded = router.post(f"{UPSTREAM}/responses").mock(
        return_value=httpx.Response(200, json={"id": "resp_1", "object": "response", "output": []})
    )
    router.post(f"{UPSTREAM}/chat/completions").mock(return_value=httpx.Response(200, json=completion()))
    config = make_config()
    config["policies"] = {"default": {"name": "default", "on_exhausted": "reject"}}
    with gateway_client(tmp_path, redis_url, router, config=config) as client:
        response = client.post(
            "/v1/responses", content=repeated("{}", 70_000), headers={"content-type": "application/json"}
        )
    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] == "context_length_exceeded"
    assert not forwarded.called
