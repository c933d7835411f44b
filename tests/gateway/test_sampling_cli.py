from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import redis

from gateway.cli import main
from gateway.sampling.keys import SamplingKeys
from gateway.sampling.since import parse_since
from tests.factories import make_config, write_config
from tests.gateway.test_sampling_factories import planted_signals


@pytest.fixture
def seeded(redis_url: str, tenant_name: str, tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """A config with a prefix of this test's own, and today's samples of ``gpt-5.4`` with a cliff at 128K."""
    prefix = f"gwtest-{tenant_name}"
    config = write_config(tmp_path / "gateway.yaml", make_config(sampling={"key_prefix": prefix}))
    keys = SamplingKeys(prefix)
    client = redis.Redis.from_url(redis_url)
    now_ms = int(time.time() * 1000)
    signals = planted_signals(cliff_at=128_000, per_bucket=30, ttft_factor=3.0, overhead=0.02)
    for n, signal in enumerate(signals):
        client.xadd(keys.samples("gpt-5.4"), signal.to_fields(), id=f"{now_ms - 10_000 + n}-0")  # type: ignore[arg-type]
    client.sadd(keys.models(), "gpt-5.4")
    try:
        yield config, prefix
    finally:
        client.delete(keys.samples("gpt-5.4"), keys.models())
        client.close()


def test_probes_report_prints_percentiles_and_the_boundary(
    seeded: tuple[Path, str], redis_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    config, _ = seeded
    assert (
        main(["probes", "report", "--model", "gpt-5.4", "--redis-url", redis_url, "--config", str(config)])
        == 0
    )
    out = capsys.readouterr().out
    assert out.startswith("gpt-5.4: 180 samples")
    assert "distributions (p10 / p50 / p90)" in out
    assert "boundary: 128K-250K (ttft_per_1k)" in out
    rows = [line for line in out.splitlines() if line.startswith("0-8K")]
    assert len(rows) == 2 and " 30 " in rows[0] and rows[0].count(" / ") == 10  # five signals, three numbers


def test_probes_report_json_and_html(
    seeded: tuple[Path, str], redis_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config, _ = seeded
    common = ("--model", "gpt-5.4", "--redis-url", redis_url, "--config", str(config))
    assert main(["probes", "report", *common, "--json"]) == 0
    body = json.loads(capsys.readouterr().out)
    assert body["boundary"]["bucket"] == "128K-250K" and body["samples"] == 180
    page = tmp_path / "out.html"
    assert main(["probes", "report", *common, "--html", str(page)]) == 0
    assert f"wrote {page}" in capsys.readouterr().out
    assert page.read_text().startswith("<!DOCTYPE html>")


def test_probes_report_lists_models_without_model(
    seeded: tuple[Path, str], redis_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    config, _ = seeded
    assert main(["probes", "report", "--redis-url", redis_url, "--config", str(config)]) == 0
    assert capsys.readouterr().out.split() == ["gpt-5.4"]


def test_probes_report_without_redis_explains(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("GATEWAY_DATA_DIR", str(tmp_path / "nowhere"))
    monkeypatch.chdir(tmp_path)
    assert main(["probes", "report", "--model", "m"]) == 1
    err = capsys.readouterr().err
    assert "GATEWAY_REDIS_URL" in err and "nowhere/redis/redis.sock" in err


def test_probes_report_reads_the_embedded_redis_socket(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from gateway.redis.server import EmbeddedRedis

    monkeypatch.setenv("GATEWAY_DATA_DIR", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    with EmbeddedRedis(tmp_path / "redis", persist=False):
        assert main(["probes", "report", "--model", "m"]) == 0
    assert capsys.readouterr().out.startswith("m: 0 samples")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("--lengths", "8k,abc"), "invalid --lengths"),
        (("--lengths", "50"), "at least 100"),
        (("--depths", "0.5,1.5"), "between 0 and 1"),
        (("--repeats", "0"), "at least 1"),
    ],
)
def test_probe_run_rejects_bad_plans(
    argv: tuple[str, ...], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["probe", "run", "--model", "m", "--key", "k", "--no-store", *argv]) == 1
    assert message in capsys.readouterr().err


def test_probe_run_fails_when_every_probe_fails(capsys: pytest.CaptureFixture[str]) -> None:
    from tests.ports import free_port

    url = f"http://127.0.0.1:{free_port()}"
    argv = ("--lengths", "500", "--depths", "0.5", "--approximate-tokens", "--no-store", "--base-url", url)
    assert main(["probe", "run", "--model", "m", "--key", "k", *argv]) == 1
    out = capsys.readouterr().out
    assert "no probe was answered" in out and "ConnectError" in out


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("30m", 1_800.0),
        ("24h", 86_400.0),
        ("7d", 604_800.0),
        ("2w", 1_209_600.0),
        ("1.5h", 5_400.0),
    ],
)
def test_parse_since_durations(text: str, expected: float) -> None:
    assert parse_since(text, now=1_000_000_000.0) == 1_000_000_000.0 - expected


def test_parse_since_dates_are_utc() -> None:
    assert parse_since("2026-11-30", now=0) == datetime(2026, 11, 30, tzinfo=UTC).timestamp()
    assert parse_since("2026-11-30T12:00:00Z", now=0) == datetime(2026, 11, 30, 12, tzinfo=UTC).timestamp()
    with pytest.raises(ValueError, match="neither a duration"):
        parse_since("last tuesday", now=0)
