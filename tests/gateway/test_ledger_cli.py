"""``gateway costs export|summary`` against a real Redis."""

from __future__ import annotations

import asyncio
import csv
import random
from decimal import Decimal
from pathlib import Path

import orjson
import pytest
import redis.asyncio as aioredis

from gateway.cli import main
from gateway.commands import store
from gateway.config.settings import Settings
from gateway.ledger.apply import EventApplier
from gateway.ledger.keys import LedgerKeys
from gateway.redis.server import EmbeddedRedis, embedded_redis_dir
from tests.factories import make_config, write_config
from tests.gateway.test_ledger_event import make_event
from tests.ports import free_port

EVENTS = [make_event(n, tenant=["alpha", "beta"][n % 2]) for n in range(40)]


@pytest.fixture
def prefix(redis_url: str) -> str:
    keys = LedgerKeys(f"test-{random.getrandbits(40):x}")

    async def fill() -> None:
        client = aioredis.Redis.from_url(redis_url)
        try:
            await EventApplier(client, keys=keys, retention_months=13).apply(EVENTS)
        finally:
            await client.aclose()

    asyncio.run(fill())
    return keys.prefix


def test_costs_export_writes_csv_file(redis_url: str, prefix: str, tmp_path: Path) -> None:
    out = tmp_path / "alpha.csv"
    code = main([
        "costs", "export", "--tenant", "alpha", "--from", "2026-11-30", "--to", "2026-11-30",
        "--redis-url", redis_url, "--key-prefix", prefix, "-o", str(out),
    ])  # fmt: skip
    assert code == 0
    rows = list(csv.DictReader(out.open(newline="")))
    alpha = [e for e in EVENTS if e.tenant == "alpha"]
    assert [row["id"] for row in rows] == [e.id for e in alpha]
    assert sum(Decimal(row["cost_usd"]) for row in rows) * 10**9 == sum(e.cost_nanos for e in alpha)


def test_costs_export_ndjson_to_stdout_merges_tenants(
    redis_url: str, prefix: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main([
        "costs", "export", "--format", "ndjson", "--from", "2026-11-01", "--to", "2026-11-30",
        "--redis-url", redis_url, "--key-prefix", prefix,
    ])  # fmt: skip
    assert code == 0
    lines = [orjson.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [line["id"] for line in lines] == [e.id for e in EVENTS]


def test_costs_summary_prints_a_table_with_total(
    redis_url: str, prefix: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main([
        "costs", "summary", "--group-by", "tenant", "--from", "2026-11-01", "--to", "2026-11-30",
        "--redis-url", redis_url, "--key-prefix", prefix,
    ])  # fmt: skip
    assert code == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].split()[:5] == ["tenant", "requests", "cost_usd", "counterfactual_usd", "saving_usd"]
    table = {line.split()[0]: line.split() for line in lines[3:] if not line.startswith("-")}
    total_cost = Decimal(sum(e.cost_nanos for e in EVENTS)) / 10**9
    assert table["alpha"][1] == "20" and table["beta"][1] == "20"
    assert Decimal(table["TOTAL"][2]) == total_cost
    assert Decimal(table["alpha"][2]) + Decimal(table["beta"][2]) == total_cost


def test_costs_summary_json(redis_url: str, prefix: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = main([
        "costs", "summary", "--group-by", "model", "--format", "json",
        "--from", "2026-11-30", "--to", "2026-11-30", "--redis-url", redis_url, "--key-prefix", prefix,
    ])  # fmt: skip
    assert code == 0
    rows = orjson.loads(capsys.readouterr().out)
    assert {row["model"]: row["requests"] for row in rows} == {
        model: sum(1 for e in EVENTS if e.model == model) for model in {e.model for e in EVENTS}
    }


def test_costs_explains_where_the_redis_url_comes_from(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("GATEWAY_DATA_DIR", str(tmp_path))
    assert main(["costs", "summary"]) == 1
    message = capsys.readouterr().err
    assert "GATEWAY_REDIS_URL" in message and str(tmp_path) in message


def test_costs_reads_the_embedded_server_socket(tmp_path: Path) -> None:
    (tmp_path / "redis").mkdir()
    (tmp_path / "redis" / "redis.sock").touch()
    url = store.redis_url(None, Settings(data_dir=tmp_path))
    assert url == f"unix://{(tmp_path / 'redis' / 'redis.sock').resolve()}?db=0"
    assert url == EmbeddedRedis(embedded_redis_dir(tmp_path)).url  # where `gateway serve` starts it
    assert (
        store.redis_url("redis://elsewhere:6379/0", Settings(data_dir=tmp_path)) == "redis://elsewhere:6379/0"
    )


def test_costs_reports_an_unreachable_redis(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["costs", "export", "--redis-url", f"redis://127.0.0.1:{free_port()}/0"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("gateway costs: cannot reach the gateway's Redis: ")
    assert all(way in err for way in ("--redis-url", "GATEWAY_REDIS_URL", "$GATEWAY_DATA_DIR/redis/"))


def test_costs_export_to_an_unwritable_file_names_the_file_not_redis(
    redis_url: str, prefix: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "no-such-directory" / "out.csv"
    argv = ["costs", "export", "--redis-url", redis_url, "--key-prefix", prefix, "-o", str(out)]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert str(out) in err and "ledger" not in err and "Redis" not in err


def test_costs_rejects_a_bad_period(redis_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(["costs", "export", "--from", "2026-11-30", "--to", "2026-11-01", "--redis-url", redis_url]) == 1
    )
    assert "invalid --from/--to" in capsys.readouterr().err


def _summary_requests(out: str) -> int:
    return sum(row["requests"] for row in orjson.loads(out))


def test_costs_reads_the_key_prefix_of_the_config(
    redis_url: str, prefix: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(tmp_path / "gateway.yaml", make_config(ledger={"key_prefix": prefix}))
    summary = ("costs", "summary", "--format", "json", "--from", "2026-11-01", "--to", "2026-11-30")
    assert main([*summary, "--redis-url", redis_url, "--config", str(config)]) == 0
    assert _summary_requests(capsys.readouterr().out) == len(EVENTS)


def test_costs_reads_the_config_named_by_gateway_config(
    redis_url: str,
    prefix: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    config = write_config(tmp_path / "gateway.yaml", make_config(ledger={"key_prefix": prefix}))
    monkeypatch.setenv("GATEWAY_CONFIG", str(config))
    monkeypatch.setenv("GATEWAY_REDIS_URL", redis_url)
    assert main(["costs", "summary", "--format", "json", "--from", "2026-11-01", "--to", "2026-11-30"]) == 0
    assert _summary_requests(capsys.readouterr().out) == len(EVENTS)


def test_costs_key_prefix_overrides_the_config(
    redis_url: str, prefix: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(tmp_path / "gateway.yaml", make_config(ledger={"key_prefix": f"{prefix}-unused"}))
    summary = ("costs", "summary", "--format", "json", "--from", "2026-11-01", "--to", "2026-11-30")
    assert main([*summary, "--redis-url", redis_url, "--config", str(config)]) == 0
    assert _summary_requests(capsys.readouterr().out) == 0
    assert main([*summary, "--redis-url", redis_url, "--config", str(config), "--key-prefix", prefix]) == 0
    assert _summary_requests(capsys.readouterr().out) == len(EVENTS)


def test_costs_explains_a_config_that_does_not_load(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        main(["costs", "summary", "--config", str(tmp_path / "missing.yaml"), "--redis-url", "redis://x"])
        == 1
    )
    assert f"no config file at {tmp_path / 'missing.yaml'}" in capsys.readouterr().err


def test_costs_summary_with_a_time_of_day_counts_only_the_events_in_that_time(
    redis_url: str, prefix: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The events are one a second from noon: 12:00:10 to 12:00:20 holds the ten events 10..19."""
    code = main([
        "costs", "summary", "--group-by", "tenant", "--format", "json",
        "--from", "2026-11-30T12:00:10Z", "--to", "2026-11-30T12:00:20Z",
        "--redis-url", redis_url, "--key-prefix", prefix,
    ])  # fmt: skip
    assert code == 0
    body = orjson.loads(capsys.readouterr().out)
    inside = [e for e in EVENTS if 10 <= int(e.id.split("-")[1]) < 20]
    assert sum(row["requests"] for row in body) == len(inside) == 10
    assert sum(Decimal(row["cost_usd"]) for row in body) * 10**9 == sum(e.cost_nanos for e in inside)
    assert sum(Decimal(row["counterfactual_usd"]) for row in body) * 10**9 == sum(
        e.counterfactual_nanos for e in inside
    )


def test_costs_export_focus_has_the_bill_and_the_savings_once_and_no_credit_rows(
    redis_url: str, prefix: str, tmp_path: Path
) -> None:
    out = tmp_path / "focus.csv"
    code = main([
        "costs", "export", "--format", "focus", "--from", "2026-11-30", "--to", "2026-11-30",
        "--redis-url", redis_url, "--key-prefix", prefix, "-o", str(out),
    ])  # fmt: skip
    assert code == 0
    rows = list(csv.DictReader(out.open(newline="")))
    assert {row["ChargeCategory"] for row in rows} == {"Usage"}  # a saving is not a credit
    assert list(dict.fromkeys(row["x_RequestId"] for row in rows)) == [e.id for e in EVENTS]
    billed = sum(Decimal(row["BilledCost"]) for row in rows) * 10**9
    assert billed == sum(e.cost_nanos for e in EVENTS)
    saved = sum(Decimal(row["x_SavingUSD"] or 0) for row in rows) * 10**9
    assert saved == sum(e.saving_nanos for e in EVENTS)
    first = rows[0]
    assert (first["ResourceId"], first["ConsumedUnit"], first["BillingCurrency"]) == (
        EVENTS[0].model,
        "Tokens",
        "USD",
    )
    assert int(first["ConsumedQuantity"]) == EVENTS[0].input_tokens + EVENTS[0].output_tokens
    assert orjson.loads(first["Tags"])["gateway/tenant"] == EVENTS[0].tenant
