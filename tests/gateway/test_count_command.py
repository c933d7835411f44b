"""``gateway count FILE``: tokens by part, band, projected costs; text and JSON; config from file or env."""

from __future__ import annotations

import io
from decimal import Decimal
from pathlib import Path
from typing import Any

import orjson
import pytest

from gateway.base.money import usd
from gateway.base.types import Usage
from gateway.cli import main
from gateway.commands import count
from gateway.config.loading import load_config
from gateway.config.schema.root import GatewayConfig
from gateway.money.pricing import price_at_tier
from gateway.tokens.counter import TokenCounter
from policies import parse_policies

CONFIG = """\
providers:
  openai:
    base_url: https://api.openai.com/v1
models:
  gpt-5.4:
    provider: openai
    context_window: 1050000
    pricing:
      input: 2.50
      cached_input: 0.25
      output: 15.00
      taken: 2026-11
      tiers:
        - above_input_tokens: 272000
          input_multiplier: 2
          cached_input_multiplier: 2
          output_multiplier: 1.5
  gpt-4o:
    provider: openai
    context_window: 128000
    pricing: {input: 2.50, cached_input: 1.25, output: 10.00}
  gemini-2.5-pro:
    provider: openai
    encoding: o200k_base
    context_window: 1048576
    pricing:
      input: 1.25
      output: 10.00
      tiers: [{above_input_tokens: 200000, input_multiplier: 2, output_multiplier: 1.5}]
  local:
    provider: openai
    context_window: 32000
  text-embedding-3-small:
    provider: openai
    kind: embedding
    context_window: 8191
    pricing: {input: 0.02, output: 0}
"""
REQUEST = {
    "model": "gpt-5.4",
    "max_completion_tokens": 4000,
    "messages": [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Summarise the plot of Hamlet in one line."},
    ],
    "tools": [{"type": "function", "function": {"name": "lookup", "description": "Find a fact."}}],
}


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    path = tmp_path / "gateway.yaml"
    path.write_text(CONFIG)
    return path


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory) -> GatewayConfig:
    path = tmp_path_factory.mktemp("config") / "gateway.yaml"
    path.write_text(CONFIG)
    return load_config(path)


@pytest.fixture(scope="module")
def counter(config: GatewayConfig) -> TokenCounter:
    return TokenCounter.build(config.counting, config.models)


def request_file(tmp_path: Path, body: dict[str, Any]) -> Path:
    path = tmp_path / "request.json"
    path.write_bytes(orjson.dumps(body))
    return path


def test_count_command_json(
    tmp_path: Path,
    config_file: Path,
    counter: TokenCounter,
    config: GatewayConfig,
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["count", str(request_file(tmp_path, REQUEST)), "--config", str(config_file), "--json"])
    report = orjson.loads(capsys.readouterr().out)
    expected = counter.count_chat("gpt-5.4", REQUEST)
    assert code == 0
    assert report["encoding"] == "o200k_base" and report["approximate"] is False
    assert (report["messages"], report["tools"], report["images"], report["total"]) == (
        expected.messages,
        expected.tools,
        0,
        expected.total,
    )
    assert report["tools"] > 0
    assert (report["band"], report["warning_line"], report["cliff"]) == ("below_warning", 250_000, 272_000)
    pricing = config.models["gpt-5.4"].pricing
    assert pricing is not None
    usage = Usage(input_tokens=expected.total, output_tokens=4000)
    normal, cliff = price_at_tier(usage, pricing, None), price_at_tier(usage, pricing, 0)
    assert report["normal"] == {"usd": usd(normal.total_nanos), "nanos": normal.total_nanos}
    assert report["at_cliff"] == {"usd": usd(cliff.total_nanos), "nanos": cliff.total_nanos}
    assert cliff.total_nanos > normal.total_nanos
    assert report["billed_at"] == "normal"
    assert report["output_tokens"] == 4000


def test_count_command_text_from_stdin_with_model_override(
    config_file: Path,
    counter: TokenCounter,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(orjson.dumps(REQUEST))))
    code = main(["count", "-", "--config", str(config_file), "--model", "gpt-4o"])
    out = capsys.readouterr().out
    total = counter.count_chat("gpt-4o", REQUEST).total
    assert code == 0
    assert "model      gpt-4o  (o200k_base)" in out
    assert f"total      {total:>12,}" in out
    assert "band       below warning  (warning line 128,000, cliff 128,000)" in out
    assert "at the normal price" in out and "at the cliff tier" not in out


def test_count_command_config_from_environment(
    tmp_path: Path, config_file: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("GATEWAY_CONFIG", str(config_file))
    code = main(["count", str(request_file(tmp_path, {**REQUEST, "model": "local"}))])
    out = capsys.readouterr().out
    assert code == 0
    assert "cost       unknown: the model has no pricing" in out
    assert "warning line 32,000, cliff 32,000" in out


@pytest.mark.parametrize(
    ("request_bytes", "config_text", "code", "message"),
    [
        (orjson.dumps(REQUEST), "models: [", 1, "not valid YAML"),
        (b"{not json", CONFIG, 2, "gateway count:"),
        (b"[1, 2]", CONFIG, 2, "JSON object"),
        (orjson.dumps({"messages": []}), CONFIG, 2, "names no model"),
    ],
)
def test_count_command_errors(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    request_bytes: bytes,
    config_text: str,
    code: int,
    message: str,
) -> None:
    config_path = tmp_path / "bad.yaml"
    config_path.write_text(config_text)
    request_path = tmp_path / "request.json"
    request_path.write_bytes(request_bytes)
    assert main(["count", str(request_path), "--config", str(config_path)]) == code
    assert message in capsys.readouterr().err


def test_count_command_missing_file(
    tmp_path: Path, config_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["count", str(tmp_path / "absent.json"), "--config", str(config_file)]) == 2
    assert "absent.json" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("model", "warning", "cliff"),
    [
        ("gpt-5.4", 250_000, 272_000),
        ("gemini-2.5-pro", 183_823, 200_000),  # 250/272 of its 200K tier line
        ("local", 32_000, 32_000),  # no tier: both lines at the context window
    ],
)
def test_count_report_uses_the_policy_engines_bands(
    config: GatewayConfig, counter: TokenCounter, model: str, warning: int, cliff: int
) -> None:
    report = count.build_report(model, REQUEST, config, counter)
    assert (report.warning_line, report.cliff, report.band) == (warning, cliff, "below_warning")


def test_count_report_follows_a_bands_override(config: GatewayConfig, counter: TokenCounter) -> None:
    overridden = config.model_copy(
        update={
            "policies": parse_policies(
                {
                    "bands": {"local": {"cliff_tokens": 20, "warning_tokens": 10}},
                    "default": {"name": "default"},
                }
            )
        }
    )
    report = count.build_report("local", REQUEST, overridden, counter)
    assert (report.warning_line, report.cliff) == (10, 20)
    assert report.total > 20
    assert report.band == "over_cliff"


def test_count_report_over_the_cliff_is_billed_at_the_cliff(
    config: GatewayConfig, counter: TokenCounter
) -> None:
    # 280,000 repetitions of " a" tokenise to one token each: a cheap way to cross 272K.
    body = {"messages": [{"role": "user", "content": " a" * 280_000}]}
    report = count.build_report("gpt-5.4", body, config, counter)
    assert report.total == 280_000 + 3 + 1 + 3
    assert (report.band, report.billed_at, report.output_tokens) == ("over_cliff", "cliff", 0)
    assert report.normal is not None and report.at_cliff is not None
    assert report.normal.nanos == report.total * 2_500
    assert report.at_cliff.nanos == report.total * 5_000
    assert "billed at the cliff price" in count.render(report)


def test_count_report_unknown_model(config: GatewayConfig, counter: TokenCounter) -> None:
    report = count.build_report("llama-3", {"messages": [{"role": "user", "content": "hi"}]}, config, counter)
    assert (report.band, report.normal, report.approximate, report.kind) == (None, None, True, None)
    assert "band       unknown: the model is not in the config" in count.render(report)


def test_count_report_embeddings(config: GatewayConfig, counter: TokenCounter) -> None:
    body = {"model": "text-embedding-3-small", "input": ["hello world", "hello"]}
    report = count.build_report("text-embedding-3-small", body, config, counter)
    assert (report.total, report.encoding, report.tools) == (3, "cl100k_base", 0)
    assert report.normal is not None and report.normal.nanos == 3 * 20
    assert report.normal.usd == usd(60)


def test_count_report_max_tokens_fallback(config: GatewayConfig, counter: TokenCounter) -> None:
    body = {"messages": [], "max_tokens": 100, "max_completion_tokens": None}
    report = count.build_report("gpt-4o", body, config, counter)
    assert report.output_tokens == 100
    assert report.normal is not None
    assert report.normal.nanos == 3 * 2_500 + 100 * 10_000
    assert Decimal(report.normal.usd) == Decimal("0.0010075")


def test_count_command_outside_the_repository_uses_the_defaults(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """No --config, no GATEWAY_CONFIG and no deploy/ here: counted with the built-in defaults."""
    monkeypatch.chdir(tmp_path)
    code = main(["count", str(request_file(tmp_path, REQUEST))])
    captured = capsys.readouterr()
    assert code == 0
    assert "note: no config file at deploy/gateway.example.yaml" in captured.err
    assert "using the default token counting" in captured.err
    assert "model      gpt-5.4  (o200k_base)" in captured.out
    assert "cost       unknown: the model has no pricing" in captured.out


def test_count_command_with_a_gateway_config_that_does_not_load_uses_the_defaults(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("models: [")
    monkeypatch.setenv("GATEWAY_CONFIG", str(bad))
    assert main(["count", str(request_file(tmp_path, REQUEST))]) == 0
    assert f"note: {bad} did not load; using the default token counting" in capsys.readouterr().err


def test_count_command_with_a_missing_config_option_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "missing.yaml"
    assert main(["count", str(request_file(tmp_path, REQUEST)), "--config", str(missing)]) == 1
    assert f"no config file at {missing}" in capsys.readouterr().err


def test_count_command_names_an_embedding_model_as_one(
    tmp_path: Path, config_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    body = {"model": "text-embedding-3-small", "input": ["hello world", "hello"]}
    assert main(["count", str(request_file(tmp_path, body)), "--config", str(config_file)]) == 0
    out = capsys.readouterr().out
    assert "not in the config" not in out
    assert "band       none: an embedding model" in out
    assert f"input      {3:>12,}" in out
    assert main(["count", str(request_file(tmp_path, body)), "--config", str(config_file), "--json"]) == 0
    report = orjson.loads(capsys.readouterr().out)
    assert (report["kind"], report["request"], report["total"], report["band"]) == (
        "embedding",
        "embeddings",
        3,
        None,
    )


def test_count_command_explains_messages_sent_to_an_embedding_model(
    tmp_path: Path, config_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    body = {**REQUEST, "model": "text-embedding-3-small"}
    assert main(["count", str(request_file(tmp_path, body)), "--config", str(config_file)]) == 2
    assert "text-embedding-3-small is an embedding model" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("body", "total"),
    [
        ({"input": "hello world"}, 2),
        ({"input": [[1, 2, 3], [4]]}, 4),  # token arrays count as themselves
    ],
)
def test_count_report_embeddings_input_forms(
    config: GatewayConfig, counter: TokenCounter, body: dict[str, Any], total: int
) -> None:
    report = count.build_report("text-embedding-3-small", body, config, counter)
    assert (report.kind, report.request, report.total) == ("embedding", "embeddings", total)
    assert "band       none: an embedding model" in count.render(report)
