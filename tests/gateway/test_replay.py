"""Replay on recorded events: the live config gives back what happened, a changed config moves actions
and spend with every assumption counted; the CLI and the admin routes, against a real Redis."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import redis.asyncio as aioredis
import respx
import yaml

from gateway.analysis import replay as rp
from gateway.analysis.candidate import parse_candidate
from gateway.analysis.replay import Replay
from gateway.analysis.replay_report import document, page, table
from gateway.base.types import Usage
from gateway.cli import main
from gateway.config.runtime import build_engine
from gateway.config.schema.root import GatewayConfig
from gateway.core.metering import cost_of
from gateway.ledger.apply import EventApplier
from gateway.ledger.event import CostEvent
from gateway.ledger.keys import LedgerKeys
from tests.factories import (
    ADMIN_KEY,
    UPSTREAM,
    chat_body,
    completion,
    gateway_client,
    make_config,
    write_config,
)
from tests.gateway.test_ledger_event import make_event

ADMIN = {"authorization": f"Bearer {ADMIN_KEY}"}
PERIOD = {"from": "a", "to": "b"}


def replay_of(config: dict[str, Any], events: list[CostEvent]) -> dict[str, Any]:
    parsed = GatewayConfig.model_validate(config)
    result = Replay(parsed, build_engine(parsed))
    for event in events:
        result.add(event)
    return document(result, period=PERIOD, candidate="candidate.yaml")


def priced(tokens: int, cached: int = 0, output: int = 50, model: str = "gpt-5.4") -> int:
    found = cost_of(Usage(tokens, cached, output), GatewayConfig.model_validate(make_config()), model)
    assert found is not None
    return found.total_nanos


def request(number: int, prompt: int, sent: int, **fields: Any) -> CostEvent:
    cached = fields.pop("cached_tokens", 0)
    values: dict[str, Any] = {
        "requested_model": "gpt-5.4", "model": "gpt-5.4", "output_tokens": 50, "prompt_tokens": prompt,
        "input_tokens": sent, "cached_tokens": cached, "cost_nanos": priced(sent, cached) if sent else 0,
        "counterfactual_cached_tokens": cached, "counterfactual_nanos": priced(prompt, cached),
        "counterfactual_basis": "forwarded", "band": "below_warning",
    }  # fmt: skip
    values.update(fields)
    return make_event(number, **values)


SUMMARY_NANOS = 1_000_000


def recorded_traffic() -> list[CostEvent]:
    """Requests as the shipped policies handled them: forwarded, compressed (with its summary call),
    forwarded with a cache hit, and one that failed."""
    summary = make_event(
        3, id="req-2:summary:1", parent_id="req-2", requested_model="small", model="small", action="summary",
        input_tokens=185_000, output_tokens=2_000, cost_nanos=SUMMARY_NANOS,
    )  # fmt: skip
    return [
        request(1, 100_000, 100_000),
        request(2, 260_000, 75_000, action="compress", band="warning", counterfactual_basis="conversation"),
        summary,
        request(4, 230_000, 230_000, cached_tokens=200_000),
        request(5, 1_000, 0, status=502, output_tokens=0, band=None, counterfactual_basis=None),
    ]


def test_replaying_the_live_config_gives_back_what_happened() -> None:
    events = recorded_traffic()
    body = replay_of(make_config(), events)
    total = body["total"]
    assert total["recorded"] == total["replayed"]
    assert total["spend_change"] == 0.0
    assert body["actions_by_band"]["warning"] == {"compress": {"recorded": 1, "replayed": 1}}
    assert body["actions_by_band"]["below_warning"] == {"forward": {"recorded": 2, "replayed": 2}}
    assert body["uncertainty"] == {rp.CARRIED_FAILED: 1}
    assert body["counterfactual_bases"] == {"conversation": 1, "forwarded": 2, "unknown": 1}


def test_another_warning_line_compresses_more_and_says_what_it_modelled() -> None:
    config = make_config(
        policies={"bands": {"gpt-5.4": {"warning_tokens": 200_000}}, "default": {"name": "d"}}
    )
    body = replay_of(config, recorded_traffic())
    actions = body["actions_by_band"]
    assert actions["warning"] == {"compress": {"recorded": 1, "replayed": 2}}
    assert actions["below_warning"] == {"forward": {"recorded": 2, "replayed": 1}}
    assert body["uncertainty"] == {rp.MODELLED_SIZE_RATIO: 1, rp.MODELLED_SIDE_RATE: 1, rp.CARRIED_FAILED: 1}
    replayed = body["total"]["replayed"]
    # the 230K request is compressed like the recorded one (to 29%: 66K), at most to the target (30% of
    # the 200K line: 60K), cold, instead of sent warm
    expected = priced(100_000) + priced(75_000) + priced(60_000)
    assert round(float(replayed["request_spend_usd"]) * 1e9) == expected
    # its summary at the rate the recorded one cost per token cut: $0.001 for 185K, so 170K cut
    assert round(float(replayed["side_call_spend_usd"]) * 1e9) == SUMMARY_NANOS + SUMMARY_NANOS * 170 // 185
    assert body["total"]["recorded"]["over_cliff"] == body["total"]["replayed"]["over_cliff"] == 0


def test_prices_and_rejections_reprice_and_spend_nothing() -> None:
    config = make_config()
    config["models"]["gpt-5.4"]["pricing"]["input"] = "5.00"  # twice the input price
    config["policies"] = {"default": {"name": "d", "actions": {"warning": "reject"}}}
    body = replay_of(config, recorded_traffic())
    assert body["actions_by_band"]["warning"]["reject"] == {"recorded": 0, "replayed": 1}
    models = body["models"]["gpt-5.4"]
    assert float(models["replayed"]["request_spend_usd"]) > float(models["recorded"]["request_spend_usd"])
    assert body["total"]["recorded"]["side_call_spend_usd"] == "0.001"
    assert body["total"]["replayed"]["side_call_spend_usd"] == "0.00"  # the rejected request's summary: gone
    text = table(body)
    assert "actions by band" in text and "carried over: a failed call" in text
    assert "<h2>Actions by band</h2>" in page(body)


def test_a_candidate_with_unset_variables_loads_with_placeholders(tmp_path: Path) -> None:
    config = make_config()
    config["tenants"]["acme"]["keys"] = ["${REPLAY_TEST_UNSET_KEY}"]
    text = yaml.safe_dump(config)
    candidate = parse_candidate(text, tmp_path / "c.yaml", {})
    assert "acme" in candidate.config.tenants
    with pytest.raises(ValueError, match="providers"):
        parse_candidate("models: {}\n", tmp_path / "bad.yaml", {})


@pytest.fixture
def prefix(redis_url: str, tenant_name: str) -> str:
    keys = LedgerKeys(f"rp-{tenant_name}")

    async def fill() -> None:
        client = aioredis.Redis.from_url(redis_url)
        try:
            await EventApplier(client, keys=keys, retention_months=13).apply(recorded_traffic())
        finally:
            await client.aclose()

    asyncio.run(fill())
    return keys.prefix


def test_replay_cli_reads_the_ledger(
    redis_url: str, prefix: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    candidate = write_config(tmp_path / "candidate.yaml", make_config())
    args = ["replay", "--config", str(candidate), "--from", "2026-11-30", "--to", "2026-11-30",
            "--redis-url", redis_url, "--key-prefix", prefix]  # fmt: skip
    assert main([*args, "--format", "json"]) == 0
    body = orjson.loads(capsys.readouterr().out)
    assert body["events"] == 5 and body["total"]["recorded"] == body["total"]["replayed"]
    assert main(args) == 0
    assert "TOTAL" in capsys.readouterr().out
    assert main(["replay", "--config", str(tmp_path / "none.yaml"), "--redis-url", redis_url]) == 1
    assert "no config file" in capsys.readouterr().err


def test_admin_replay_routes(tmp_path: Path, redis_url: str) -> None:
    router = respx.Router(assert_all_called=False)
    router.post(f"{UPSTREAM}/chat/completions").mock(return_value=httpx.Response(200, json=completion()))
    with gateway_client(tmp_path, redis_url, router) as client:
        assert client.post("/v1/chat/completions", json=chat_body()).status_code == 200
        assert client.get("/admin/replay").status_code == 401
        live = client.get("/admin/replay", params={"tenant": "acme"}, headers=ADMIN)
        html = client.get("/admin/replay", params={"format": "html"}, headers=ADMIN)
        candidate = yaml.safe_dump(make_config(policies={"default": {"name": "d"}}))
        posted = client.post("/admin/replay", content=candidate, headers=ADMIN)
        bad = client.post("/admin/replay", content="providers: [", headers=ADMIN)
        bad_period = client.get("/admin/replay", params={"from": "yesterday"}, headers=ADMIN)
    assert live.status_code == 200 and live.json()["candidate"] == "the config in force"
    assert html.status_code == 200 and "<h1>Replay under the config in force</h1>" in html.text
    assert posted.status_code == 200 and posted.json()["object"] == "gateway.replay"
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_config"
    assert bad_period.status_code == 400 and bad_period.json()["error"]["param"] == "from"
