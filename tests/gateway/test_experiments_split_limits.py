"""What split routing leaves in Redis, and what it does when Redis answers with an error: a real Redis,
the upstream mocked at the HTTP boundary (respx)."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import redis
import respx
from structlog.testing import capture_logs

from gateway.experiments.split import conversation_key
from gateway.experiments.store import ExperimentKeys
from tests.factories import OTHER_KEY, UPSTREAM, chat_body, completion, gateway_client
from tests.gateway.test_experiments_shadow import PRICED, traffic_of, wait_for
from tests.gateway.test_experiments_split import split_config
from tests.gateway.test_metrics import parse, value

pytestmark = pytest.mark.usefixtures("experiments_flush_often")

KEYS = ExperimentKeys()


@pytest.fixture
def router() -> respx.Router:
    router = respx.Router(assert_all_called=False)
    router.post(f"{UPSTREAM}/chat/completions").mock(
        side_effect=lambda request: httpx.Response(
            200, json=completion(model=orjson.loads(request.content)["model"])
        )
    )
    return router


def arm_keys(redis_url: str, name: str) -> list[bytes]:
    client = redis.Redis.from_url(redis_url)
    try:
        return sorted(client.scan_iter(f"gw:{{experiment:{name}}}:arm:*"))
    finally:
        client.close()


def remembered(redis_url: str, name: str) -> int:
    client = redis.Redis.from_url(redis_url)
    try:
        return int(client.zcard(KEYS.assignments(name)))
    finally:
        client.close()


def opening(number: int, name: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": f"conversation {number} of {name}"}]


def test_a_request_refused_for_its_budget_leaves_no_arm_behind(
    tmp_path: Path, redis_url: str, router: respx.Router
) -> None:
    name = f"refused-{uuid.uuid4().hex[:8]}"
    config = split_config(name, sample_rate=1.0)
    config["models"]["gpt-5.2"]["pricing"] = PRICED
    config["tenants"]["acme"]["budget"] = {"daily_usd": "0.000001"}  # holds no call of gpt-5.2
    with gateway_client(tmp_path, redis_url, router, config=config) as client:
        for number in range(20):
            refused = client.post("/v1/chat/completions", json=chat_body(messages=opening(number, name)))
            assert refused.status_code == 429
        admitted = client.post(
            "/v1/chat/completions",
            json=chat_body(messages=opening(99, name)),
            headers={"authorization": f"Bearer {OTHER_KEY}"},  # globex: no budget
        )
        assert admitted.status_code == 200
        written = wait_for(lambda: arm_keys(redis_url, name))
    assert len(written) == 1  # the admitted request's conversation only
    assert written[0].decode().endswith(conversation_key("globex", {}, opening(99, name)))
    assert remembered(redis_url, name) == 1


def test_past_the_cap_new_conversations_stay_on_the_primary_and_are_counted(
    tmp_path: Path, redis_url: str, router: respx.Router
) -> None:
    name = f"capped-{uuid.uuid4().hex[:8]}"
    config = split_config(name, sample_rate=1.0)
    config["limits"] = {"split_conversations_per_experiment": 3}
    models: dict[int, list[str]] = {}
    with gateway_client(tmp_path, redis_url, router, config=config) as client:
        for number in range(6):
            messages = opening(number, name)
            for _turn in range(2):
                response = client.post("/v1/chat/completions", json=chat_body(messages=messages))
                assert response.status_code == 200
                models.setdefault(number, []).append(response.headers["x-gateway-model"])
                messages = [
                    *messages,
                    {"role": "assistant", "content": "ok"},
                    {"role": "user", "content": "go"},
                ]
                # each first turn's arm lands before the next conversation starts (it is written after)
                wait_for(lambda n=number: remembered(redis_url, name) >= min(n + 1, 3))
        counted = wait_for(lambda: traffic_of(redis_url, name).get("split_full", 0) >= 6)
        report = client.get(
            f"/admin/experiments/{name}/report", headers={"authorization": "Bearer admin-test-key"}
        )
    assert counted
    assert [models[number] for number in range(3)] == [["gpt-5.2", "gpt-5.2"]] * 3
    assert [models[number] for number in range(3, 6)] == [["gpt-5.4", "gpt-5.4"]] * 3
    assert remembered(redis_url, name) == 3 and len(arm_keys(redis_url, name)) == 3
    traffic = traffic_of(redis_url, name)
    assert (traffic["split_candidate"], traffic["split_primary"], traffic["split_full"]) == (6, 6, 6)
    assert report.status_code == 200, report.text
    assert report.json()["counters"]["split_full"] == 6


def test_a_redis_error_on_the_arm_is_logged_once_counted_each_time_and_the_primary_answers(
    tmp_path: Path, redis_url: str, router: respx.Router
) -> None:
    name = f"wrongtype-{uuid.uuid4().hex[:8]}"
    messages = opening(1, name)
    key = KEYS.assignment(name, conversation_key("acme", {}, messages))
    plain = redis.Redis.from_url(redis_url)
    plain.rpush(key, "not", "an", "arm")  # a list where a string is kept: WRONGTYPE on every read
    try:
        with gateway_client(
            tmp_path, redis_url, router, config=split_config(name, sample_rate=1.0)
        ) as client:
            with capture_logs() as logs:
                answers = [
                    client.post("/v1/chat/completions", json=chat_body(messages=messages)) for _ in range(3)
                ]
            samples = parse(client.get("/metrics").text)
    finally:
        plain.delete(key)
        plain.close()
    assert [answer.status_code for answer in answers] == [200, 200, 200]
    assert {answer.headers["x-gateway-model"] for answer in answers} == {"gpt-5.4"}  # the primary
    assert {answer.headers["x-gateway-experiment"] for answer in answers} == {f"{name}; arm=primary"}
    errors = [line for line in logs if line["event"] == "experiment_redis_error"]
    assert len(errors) == 1  # once a minute, not once a request
    assert (errors[0]["experiment"], errors[0]["operation"], errors[0]["kind"]) == (
        name,
        "assign",
        "WRONGTYPE",
    )
    assert errors[0]["fallback"] == "primary"
    labels = {"experiment": name, "operation": "assign", "kind": "WRONGTYPE"}
    assert value(samples, "gateway_experiment_redis_errors_total", **labels) == 3
    assert not [line for line in logs if line["event"] == "experiment_redis_unreachable"]
