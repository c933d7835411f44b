"""Replay checked against reality: the same traffic goes through a ``gateway serve`` process (the mock
upstream process answering, the cheap summary model included) twice, under the live config and under one
with another warning line. Replaying the first run under its own config gives back its spend (within 2%);
replaying it under the second config moves the actions by band as the second run did, and its modelled
spend lands within 10% of the second run's."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import openai
import orjson
import pytest
import redis.asyncio as aioredis

from gateway.cli import main
from gateway.ledger import CostEvent, LedgerKeys, LedgerReader, Period
from tests.e2e.processes import gateway_process
from tests.factories import TENANT_KEY, make_config, write_config
from tests.fixtures.conversations import conversation, tokens_of

CLIFF = 40_000
"""The policies' cliff for gpt-5.4 here: small prompts cross the lines quickly."""
SIZES = (5_000, 15_000, 28_000, 33_000, 38_000, 8_000, 30_000)
"""Each a conversation of its own (its own seed): A (warning at 36K) compresses the 38K one only;
B (warning at 25K) compresses the 28K, 30K, 33K and 38K ones."""


def sized(tokens: int, seed: int) -> list[dict[str, Any]]:
    """A generated conversation of about ``tokens`` tokens (within a turn)."""
    probe = conversation(10, words_per_turn=300, seed=seed)
    per_turn = tokens_of(probe) / 10
    return conversation(max(2, round(tokens / per_turn)), words_per_turn=300, seed=seed)


def config_for(tenant: str, warning: int, mock_url: str) -> dict[str, Any]:
    config = make_config(
        tenants={tenant: {"keys": [TENANT_KEY]}},
        policies={
            "bands": {"gpt-5.4": {"cliff_tokens": CLIFF, "warning_tokens": warning}},
            "default": {
                "name": "default",
                "compress": {"cheap_model": "small", "target_ratio": 0.6, "pinned_tokens": 2000},
            },
        },
    )
    config["providers"]["mock"]["base_url"] = f"{mock_url}/v1".replace("127.0.0.1", "localhost")
    config["models"]["small"]["pricing"] = {"input": "0.25", "output": "2.00"}  # the summaries cost
    return config


def send(url: str, traffic: list[list[dict[str, Any]]]) -> list[str]:
    client = openai.OpenAI(base_url=f"{url}/v1", api_key=TENANT_KEY, max_retries=0)
    actions = []
    for messages in traffic:
        raw = client.chat.completions.with_raw_response.create(model="gpt-5.4", messages=messages)  # type: ignore[arg-type]
        actions.append(raw.headers["x-gateway-action"])
    return actions


def events_of(redis_url: str, tenant: str, period: Period) -> list[CostEvent]:
    async def read() -> list[CostEvent]:
        client = aioredis.Redis.from_url(redis_url)
        try:
            reader = LedgerReader(client, keys=LedgerKeys())
            return [event async for event in reader.events(tenant, period)]
        finally:
            await client.aclose()

    return asyncio.run(read())


def replayed(
    candidate: Path, redis_url: str, tenant: str, capsys: pytest.CaptureFixture[str]
) -> dict[str, Any]:
    capsys.readouterr()
    code = main([
        "replay", "--config", str(candidate), "--tenant", tenant, "--redis-url", redis_url,
        "--format", "json", "--from", "2000-01-01",
    ])  # fmt: skip
    assert code == 0
    body: dict[str, Any] = orjson.loads(capsys.readouterr().out)
    return body


def spend(events: list[CostEvent]) -> int:
    return sum(event.cost_nanos for event in events)


def actions_by_band(events: list[CostEvent]) -> Counter[tuple[str, str]]:
    return Counter((event.band or "", event.action) for event in events if event.parent_id is None)


def replayed_actions(body: dict[str, Any]) -> Counter[tuple[str, str]]:
    found: Counter[tuple[str, str]] = Counter()
    for band, row in body["actions_by_band"].items():
        for action, counts in row.items():
            if counts["replayed"]:
                found[(band, action)] = counts["replayed"]
    return found


def test_replay_reproduces_the_live_run_and_moves_actions_like_a_live_run(
    tmp_path: Path, mock_url: str, redis_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Run A under the live config; the config is then changed to B (another warning line, the key moved
    to a second tenant) and reloaded, and the same traffic is run again as B."""
    suffix = uuid.uuid4().hex[:8]
    tenant_a, tenant_b = f"replay-a-{suffix}", f"replay-b-{suffix}"
    traffic = [sized(tokens, seed=100 + number) for number, tokens in enumerate(SIZES)]
    live = write_config(tmp_path / "live.yaml", config_for(tenant_a, 36_000, mock_url))
    other = write_config(tmp_path / "other.yaml", config_for(tenant_b, 25_000, mock_url))
    served = write_config(tmp_path / "gateway.yaml", config_for(tenant_a, 36_000, mock_url))
    started = time.time()
    httpx.post(f"{mock_url}/_reset")  # no prompt cache left from an earlier test
    with gateway_process(served, redis_url, tmp_path) as url:
        actions_a = send(url, traffic)
        served.write_text(other.read_text())
        reload = httpx.post(f"{url}/admin/config/reload", headers={"authorization": "Bearer admin-e2e"})
        assert reload.status_code == 200
        httpx.post(f"{mock_url}/_reset")  # B starts as cold as A did
        actions_b = send(url, traffic)
    # the gateway has stopped: its ledger is drained to Redis
    assert actions_a.count("compress") == 1 and actions_b.count("compress") == 4
    period = Period(int(started * 1000) - 60_000, int(time.time() * 1000) + 60_000)
    run_a = events_of(redis_url, tenant_a, period)
    run_b = events_of(redis_url, tenant_b, period)
    assert sum(event.parent_id is None for event in run_a) == len(SIZES)
    assert any(event.parent_id is not None for event in run_b)  # the summaries the cheap model wrote

    same = replayed(live, redis_url, tenant_a, capsys)
    recorded = spend(run_a)
    assert same["events"] == len(run_a)
    assert round(float(same["total"]["recorded"]["spend_usd"]) * 1e9) == recorded
    again = round(float(same["total"]["replayed"]["spend_usd"]) * 1e9)
    assert abs(again - recorded) <= 0.02 * recorded
    assert replayed_actions(same) == actions_by_band(run_a)

    moved = replayed(other, redis_url, tenant_a, capsys)
    assert replayed_actions(moved) == actions_by_band(run_b)
    live_b = spend(run_b)  # modelled: the summaries' length and cost learnt from run A's one compression
    assert abs(round(float(moved["total"]["replayed"]["spend_usd"]) * 1e9) - live_b) <= 0.1 * live_b
    assert any(reason.startswith("transform modelled") for reason in moved["uncertainty"])
