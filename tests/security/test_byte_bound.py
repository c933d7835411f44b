"""Attack: a body small in bytes but large in tokens, decided on its byte size and sent over the cliff.

The report: 70,000 ``{}`` items are 210 KB and 350,003 tokens, over the 272,000-token cliff that their byte
size stays under. The Responses bound (``gateway.fronts.responses.counting``) is proven for every item
shape, so such a body is counted exactly and meets its real band. Here the same attack at a tenth of the
size, against a model whose cliff is a tenth too (27,200 tokens): 7,000 items, 21 KB and 35,003 tokens,
on the same sides of the cliff (``tests/gateway/test_responses_bound`` bounds the full-size body).
"""

from __future__ import annotations

from pathlib import Path

import httpx
import respx

from tests.factories import UPSTREAM, completion, gateway_client, make_config
from tests.gateway.test_responses_bound import repeated

ITEMS = 7_000
CLIFF = 27_200


def test_responses_pipeline_counts_the_reported_body_exactly(tmp_path: Path, redis_url: str) -> None:
    """7,000 ``{}`` items are 35,003 tokens, over the cliff: the policy's action there (retrieve, which has
    no document to cut; then ``on_exhausted``, here ``reject``: 400 ``context_length_exceeded``, since the
    same request would fail the same way again), not a forward decided on the byte size."""
    body = repeated("{}", ITEMS)
    assert len(body) < CLIFF  # decided on its bytes, it would be under the cliff
    router = respx.Router(assert_all_called=False)
    forwarded = router.post(f"{UPSTREAM}/responses").mock(
        return_value=httpx.Response(200, json={"id": "resp_1", "object": "response", "output": []})
    )
    router.post(f"{UPSTREAM}/chat/completions").mock(return_value=httpx.Response(200, json=completion()))
    config = make_config()
    config["models"]["gpt-5.4"]["pricing"]["tiers"][0]["above_input_tokens"] = CLIFF
    config["policies"] = {"default": {"name": "default", "on_exhausted": "reject"}}
    with gateway_client(tmp_path, redis_url, router, config=config) as client:
        response = client.post("/v1/responses", content=body, headers={"content-type": "application/json"})
    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] == "context_length_exceeded"
    assert not forwarded.called
