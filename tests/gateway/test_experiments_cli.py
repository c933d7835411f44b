from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
import redis

from gateway.cli import main
from gateway.experiments.store import ExperimentKeys
from gateway.ledger.keys import LedgerKeys
from gateway.ledger.period import day_of
from tests.factories import make_config, write_config
from tests.gateway.experiment_factories import make_pair, make_side, tool_agreement

EXPERIMENTS = {
    "mini": {"mode": "shadow", "primary": ["gpt-5.4"], "candidate": "small", "sample_rate": 0.1,
             "budget_usd_per_day": 20, "match": {"min_tokens": 8000}},
    "half": {"mode": "split", "primary": "gpt-5.4", "candidate": "gpt-5.2", "sample_rate": 0.5},
}  # fmt: skip


@pytest.fixture
def seeded(redis_url: str, tenant_name: str, tmp_path: Path) -> Iterator[Path]:
    """A config with a key prefix of this test's own; today's pairs of ``mini`` (40 at 150K tokens, the
    candidate 3x slower and choosing another tool in half of them; 12 at 20K), its traffic and its spend."""
    prefix = f"gwtest-{tenant_name}"
    config = write_config(
        tmp_path / "gateway.yaml", make_config(experiments=EXPERIMENTS, ledger={"key_prefix": prefix})
    )
    keys = ExperimentKeys(prefix)
    client = redis.Redis.from_url(redis_url)
    now_ms = int(time.time() * 1000)
    for n in range(40):
        pair = make_pair(n, tokens=150_000, primary=make_side(latency_ms=500, cost_nanos=5_000_000),
                         candidate=make_side("small", latency_ms=1_500, cost_nanos=1_000_000),
                         agreement=tool_agreement(n % 2 == 0, n % 2 == 0), tools=True)  # fmt: skip
        client.xadd(keys.pairs("mini"), {"pair": orjson.dumps(pair)}, id=f"{now_ms - 60_000 + n}-0")
    for n in range(12):
        pair = make_pair(100 + n, tokens=20_000, primary=make_side(), candidate=make_side("small"))
        client.xadd(keys.pairs("mini"), {"pair": orjson.dumps(pair)}, id=f"{now_ms - 30_000 + n}-0")
    traffic = {
        "n:128000": 400,
        "cost:128000": 2_000_000_000,
        "n:8000": 100,
        "cost:8000": 100_000_000,
        "shed": 3,
    }
    client.hset(keys.traffic("mini", day_of(now_ms)), mapping=traffic)  # type: ignore[arg-type]
    client.hset(LedgerKeys(prefix).daily("experiment:mini", day_of(now_ms)), "cost", 2_500_000_000)
    try:
        yield config
    finally:
        found = list(client.scan_iter(match=f"{prefix}:*"))
        if found:
            client.delete(*found)
        client.close()


def run(*argv: str) -> int:
    return main(list(argv))


def test_experiments_report_prints_the_side_by_side_table_and_verdicts(
    seeded: Path, redis_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run("experiments", "report", "mini", "--redis-url", redis_url, "--config", str(seeded)) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0] == "experiment mini: shadow, gpt-5.4 against small, sample rate 0.1, enabled"
    assert lines[2].startswith("spent today $2.50 (12% of $20.00 a day); shadowed 0, shed 3")
    long = [line for line in lines if line.startswith("128K-250K")]
    assert long[0].split()[:3] == ["128K-250K", "40", "primary"]
    assert "  8K-32K: 12 pairs, too few to compare (30 needed)" in lines
    verdict = next(line for line in lines if line.startswith("  128K-250K: 40 pairs"))
    assert "candidate p50 latency 3.0x the primary's" in verdict
    assert "same tool 50% (20/40 tool pairs), same arguments 50% (20/40)" in verdict
    assert "  projected difference for all matching traffic: " in out


def test_experiments_report_json_and_html(
    seeded: Path, redis_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    common = ("--redis-url", redis_url, "--config", str(seeded))
    assert run("experiments", "report", "mini", *common, "--json") == 0
    body = json.loads(capsys.readouterr().out)
    assert body["pairs"] == 52 and body["budget"]["spent_today_usd"] == "2.500000000"
    assert [item["pairs"] for item in body["buckets"]] == [12, 0, 40, 0, 0]
    page = tmp_path / "out.html"
    assert run("experiments", "report", "mini", *common, "--html", str(page)) == 0
    assert capsys.readouterr().out == f"wrote {page} (52 pairs in 5 buckets)\n"
    assert page.read_text().startswith("<!DOCTYPE html>")
    with pytest.raises(SystemExit):
        run("experiments", "report", "mini", *common, "--json", "--html", str(page))


def test_experiments_report_of_an_unknown_name_fails_and_says_so(
    seeded: Path, redis_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run("experiments", "report", "nope", "--redis-url", redis_url, "--config", str(seeded)) == 1
    err = capsys.readouterr().err
    assert err == (
        "gateway experiments: no experiment named 'nope': not configured (configured: mini, half) and no"
        " data in Redis\n"
    )


def test_experiments_report_rejects_a_bad_since(
    seeded: Path, redis_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ("--redis-url", redis_url, "--config", str(seeded), "--since", "yesterday")
    assert run("experiments", "report", "mini", *argv) == 1
    assert "invalid --since" in capsys.readouterr().err


def test_experiments_list(seeded: Path, redis_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert run("experiments", "list", "--redis-url", redis_url, "--config", str(seeded)) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == lines[0].rstrip() and lines[0].startswith(
        "name  mode    primary  candidate  sample rate"
    )
    assert lines[1].split() == ["half", "split", "gpt-5.4", "gpt-5.2", "0.5", "yes", "-", "$0"]
    assert lines[2].split() == ["mini", "shadow", "gpt-5.4", "small", "0.1", "yes", "$20.00", "$2.50"]
    assert run("experiments", "list", "--redis-url", redis_url, "--config", str(seeded), "--json") == 0
    listed = json.loads(capsys.readouterr().out)
    assert [item["name"] for item in listed] == ["half", "mini"] and listed[1][
        "spent_today_usd"
    ] == "2.500000000"


def test_experiments_list_without_a_config_file(
    redis_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert run("experiments", "list", "--redis-url", redis_url) == 0
    captured = capsys.readouterr()
    assert captured.out == "no experiments configured\n" and "note: no config file" in captured.err


def test_experiments_report_without_redis_explains(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("GATEWAY_DATA_DIR", str(tmp_path / "nowhere"))
    monkeypatch.chdir(tmp_path)
    assert run("experiments", "report", "mini") == 1
    err = capsys.readouterr().err
    assert "GATEWAY_REDIS_URL" in err and "nowhere/redis/redis.sock" in err
