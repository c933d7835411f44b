"""At start the gateway says what it will call and warns of tenants whose keys resolve to nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from structlog.testing import capture_logs

from gateway.commands.serve import announce
from gateway.config.loading import parse_config
from gateway.config.reload import ConfigStore
from gateway.config.settings import Settings
from gateway.config.startup import startup_notices

CONFIG = """\
providers:
  openai:
    base_url: https://api.example.test/v1
    api_key: ${OPENAI_API_KEY:-}
  local:
    base_url: http://127.0.0.1:11434/v1
models:
  gpt-5.4: {provider: openai, context_window: 1050000}
tenants:
  default:
    keys: ["${DEFAULT_TENANT_KEY:-}"]
  team:
    keys: ["${TEAM_KEY:-}", "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"]
"""


def notices(env: dict[str, str]) -> list[str]:
    config = parse_config(CONFIG, Path("gateway.yaml"), env)
    return [f"{notice.level}: {notice.text}" for notice in startup_notices(config, CONFIG)]


def test_each_provider_is_named_with_its_base_url_and_whether_its_key_is_set() -> None:
    said = notices({"OPENAI_API_KEY": "sk-x", "DEFAULT_TENANT_KEY": "sk-t", "TEAM_KEY": "sk-u"})
    assert said == [
        "info: provider openai: https://api.example.test/v1 (API key set)",
        "info: provider local: http://127.0.0.1:11434/v1 (API key not set)",
    ]


def test_a_tenant_whose_keys_resolve_to_nothing_is_a_warning_naming_the_variable() -> None:
    said = notices({})
    assert (
        "warning: tenant default has no usable key: its key is empty (DEFAULT_TENANT_KEY unset or empty); "
        "its requests will get 401"
    ) in said
    assert "warning: tenant team: 1 of its 2 keys are empty (TEAM_KEY unset or empty)" in said


def test_serve_prints_and_logs_the_notices_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "gateway.yaml"
    path.write_text(CONFIG)
    config = parse_config(CONFIG, path, {})
    with capture_logs() as logs:
        announce(Settings(config=path), config)
    printed = capsys.readouterr().out.splitlines()
    assert "gateway: provider openai: https://api.example.test/v1 (API key not set)" in printed
    assert any(line.startswith("gateway: warning: tenant default has no usable key") for line in printed)
    events = [(entry["log_level"], entry["event"], entry.get("tenant")) for entry in logs]
    assert events.count(("warning", "tenant_key_empty", "default")) == 1
    assert events.count(("info", "upstream_provider", None)) == 2


@pytest.mark.parametrize(
    ("admin_key", "line"),
    [
        (
            None,
            "gateway: admin routes off: set GATEWAY_ADMIN_KEY to turn on /admin/* (config, costs, reports)",
        ),
        ("admin-secret", "gateway: admin routes on: /admin/* with GATEWAY_ADMIN_KEY"),
    ],
)
def test_serve_says_whether_the_admin_routes_answer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], admin_key: str | None, line: str
) -> None:
    path = tmp_path / "gateway.yaml"
    path.write_text(CONFIG)
    with capture_logs() as logs:
        announce(Settings(config=path, admin_key=admin_key), parse_config(CONFIG, path, {}))
    assert line in capsys.readouterr().out.splitlines()
    (logged,) = [entry for entry in logs if entry["event"] == "admin_routes"]
    assert logged["enabled"] is (admin_key is not None)
    assert "admin-secret" not in str(logs)


def test_a_reload_that_leaves_a_tenant_without_keys_warns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DEFAULT_TENANT_KEY", "sk-t")
    monkeypatch.setenv("TEAM_KEY", "sk-u")
    path = tmp_path / "gateway.yaml"
    path.write_text(CONFIG)
    store = ConfigStore(path)
    data = yaml.safe_load(CONFIG)
    data["tenants"]["default"]["keys"] = ["${RENAMED_KEY:-}"]
    path.write_text(yaml.safe_dump(data))
    with capture_logs() as logs:
        store.reload()
    warned = [entry for entry in logs if entry["event"] == "tenant_key_empty"]
    assert [(entry["tenant"], entry["variables"]) for entry in warned] == [("default", ["RENAMED_KEY"])]
