"""Config loading: interpolation, validation messages with file and line, reload, and the CLI commands."""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest
import yaml

from gateway.cli import main
from gateway.config.loading import ConfigError, interpolate, load_config, parse_config
from gateway.config.reload import ConfigStore
from tests.factories import make_config, shared_counter, write_config

VALID = """\
providers:
  p:
    base_url: ${BASE:-http://up.test/v1}
    api_key: ${KEY}
models:
  m: {provider: p}
tenants:
  t: {keys: ["${TENANT_KEY}"]}
"""

EXAMPLE = Path(__file__).resolve().parents[2] / "deploy" / "gateway.example.yaml"


@pytest.mark.parametrize(
    ("text", "env", "expected"),
    [
        ("${A}", {"A": "x"}, "x"),
        ("${A:-d}", {}, "d"),
        ("${A:-d}", {"A": ""}, "d"),
        ("${A:-}", {}, ""),
        ("pre-${A}-${B:-b}", {"A": "a"}, "pre-a-b"),
        ("no vars", {}, "no vars"),
    ],
)
def test_interpolate(text: str, env: dict[str, str], expected: str) -> None:
    assert interpolate(text, env) == expected


def test_interpolate_unset_without_default_raises() -> None:
    with pytest.raises(KeyError):
        interpolate("${MISSING}", {})


def test_parse_interpolates_and_validates() -> None:
    config = parse_config(VALID, Path("g.yaml"), {"KEY": "sk-up", "TENANT_KEY": "sk-t"})
    assert config.providers["p"].base_url == "http://up.test/v1"
    assert config.providers["p"].api_key == "sk-up"
    assert len(config.tenants["t"].key_hashes()) == 1


def test_unset_variable_names_file_and_line() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(VALID, Path("g.yaml"), {"TENANT_KEY": "x"})
    assert caught.value.problems == [
        "g.yaml:4: environment variable KEY is not set (write ${KEY:-default} to give a default)"
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "providers: {}\nmodels:\n  m:\n    provider: p\n    context_window: -5\n",
            "g.yaml:5: models.m.context_window",
        ),
        ("providers:\n  p: {base_url: ftp://x}\nmodels: {}\n", "g.yaml:2: providers.p.base_url"),
        ("providers:\n  p: {base_url: http://x, colour: red}\nmodels: {}\n", "g.yaml:2: providers.p.colour"),
        ("providers: [\n", "g.yaml:2: not valid YAML"),
        ("- a\n- b\n", "g.yaml:1: the config must be a mapping"),
        ("providers: {}\nmodels: {}\nmodels: {}\n", "g.yaml:3: duplicate key 'models'"),
        (  # a template's braces: a mapping whose key is a mapping, never a TypeError
            "providers:\n  p:\n    base_url: http://x\n    api_key: {{OPENAI_API_KEY}}\nmodels: {}\n",
            "g.yaml:4: a mapping or list where a key was expected: `{{...}}` is YAML for a mapping",
        ),
        (
            "providers: {}\nmodels: {}\ntenants:\n  t:\n    keys: [{{KEY}}]\n",
            "g.yaml:5: a mapping or list where a key was expected",
        ),
        (  # taken as text, it would be a key that silently never works
            "providers:\n  p:\n    base_url: http://x\n    api_key: ${{OPENAI_API_KEY}}\nmodels: {}\n",
            "g.yaml:4: `${` must start ${VAR} or ${VAR:-default}",
        ),
    ],
)
def test_invalid_configs_say_where(text: str, expected: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(text, Path("g.yaml"), {})
    assert any(problem.startswith(expected) for problem in caught.value.problems), caught.value.problems


MODEL_FIELD_TYPO = """\
providers: {p: {base_url: http://x}}
models:
  m:
    provider: p
    max_output_token: 5
"""
RULE_FIELD_TYPO = """\
providers: {}
models: {}
policies:
  default: {}
  rules:
    - {name: r, match: {tenant: [t]}}
"""


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "providers: {}\nmodles: {}\nmodels: {}\n",
            "g.yaml:2: modles: Extra inputs are not permitted; did you mean 'models'?",
        ),
        (
            MODEL_FIELD_TYPO,
            "g.yaml:5: models.m.max_output_token: Extra inputs are not permitted; did you mean "
            "'max_output_tokens'?",
        ),
        (
            "providers:\n  p: {base_url: http://x, timeouts: {conect: 1}}\nmodels: {}\n",
            "g.yaml:2: providers.p.timeouts.conect: Extra inputs are not permitted; did you mean 'connect'?",
        ),
        (
            RULE_FIELD_TYPO,
            "g.yaml:6: policies.rules.0.match.tenant: Extra inputs are not permitted; did you mean "
            "'tenants'?",
        ),
        (
            "providers: {}\nmodels: {}\npassthrough:\n  - {path: /x, method: [GET]}\n",
            "g.yaml:4: passthrough.0.method: Extra inputs are not permitted; did you mean 'methods'?",
        ),
        (  # nothing close: no guess
            "providers:\n  p: {base_url: http://x, colour: red}\nmodels: {}\n",
            "g.yaml:2: providers.p.colour: Extra inputs are not permitted",
        ),
    ],
)
def test_unknown_fields_suggest_the_field_meant(text: str, expected: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(text, Path("g.yaml"), {})
    assert expected in caught.value.problems, caught.value.problems


REFERENCES = """\
providers:
  p: {base_url: http://up.test/v1}
models:
  a:
    provider: nowhere
    encoding: p50k_base
    fallbacks: [b, missing]
  b: {provider: p}
tenants:
  one: {keys: [same]}
  two:
    keys:
      - other
      - same
"""


@pytest.mark.parametrize(
    "expected",
    [
        "g.yaml:5: models.a.provider: unknown provider 'nowhere'",
        "g.yaml:6: models.a.encoding: unknown encoding 'p50k_base' (known: o200k_base, cl100k_base)",
        "g.yaml:7: models.a.fallbacks.1: unknown model 'missing'",
        "g.yaml:14: tenants.two.keys.1: a key is shared with tenant 'one'",
    ],
)
def test_unresolved_references_name_their_line(expected: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(REFERENCES, Path("g.yaml"), {})
    assert expected in caught.value.problems, caught.value.problems


def test_every_unresolved_reference_is_reported_at_once() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(REFERENCES, Path("g.yaml"), {})
    assert len(caught.value.problems) == 4, caught.value.problems


def test_unknown_provider_and_fallback_are_rejected() -> None:
    config = make_config()
    config["models"]["gpt-5.2"]["provider"] = "nowhere"
    config["models"]["gpt-5.4"]["fallbacks"] = ["missing"]
    with pytest.raises(ConfigError, match="unknown"):
        parse_config(yaml.safe_dump(config), Path("g.yaml"), {})


def test_a_key_shared_by_two_tenants_is_rejected() -> None:
    config = make_config(tenants={"a": {"keys": ["same"]}, "b": {"keys": ["same"]}})
    with pytest.raises(ConfigError, match="shared"):
        parse_config(yaml.safe_dump(config), Path("g.yaml"), {})


def test_a_key_repeated_within_one_tenant_is_accepted() -> None:
    config = make_config(tenants={"a": {"keys": ["same", "same"]}})
    assert parse_config(yaml.safe_dump(config), Path("g.yaml"), {}).tenants["a"].key_hashes()


def test_empty_key_never_authenticates() -> None:
    config = parse_config(VALID.replace("${TENANT_KEY}", "${TENANT_KEY:-}"), Path("g.yaml"), {"KEY": "k"})
    assert config.tenants["t"].key_hashes() == ()


def test_example_config_is_valid() -> None:
    config = load_config(EXAMPLE, env={})
    assert "gpt-5.4" in config.models


def test_store_reload_keeps_last_good_config(tmp_path: Path) -> None:
    path = write_config(tmp_path / "g.yaml", make_config())
    store = ConfigStore(path, counter=shared_counter())
    first = store.current
    path.write_text("providers: [broken\n")
    assert store.changed()
    with pytest.raises(ConfigError):
        store.reload()
    assert store.current is first
    assert store.reload_failures == 1
    config = make_config()
    config["models"]["new-model"] = {"provider": "mock"}
    write_config(path, config)
    store.reload()
    assert "new-model" in store.current.routes
    assert store.reloads == 1


def test_store_rejects_a_ledger_change_until_restart(tmp_path: Path) -> None:
    path = write_config(tmp_path / "g.yaml", make_config())
    store = ConfigStore(path, counter=shared_counter())
    first = store.current
    write_config(path, make_config(ledger={"key_prefix": "other"}))
    with pytest.raises(ConfigError, match="the ledger section changes only on restart"):
        store.reload()
    assert store.current is first
    assert (store.reload_failures, store.reloads) == (1, 0)
    assert store.last_error is not None and "ledger" in store.last_error
    assert (
        ConfigStore(path, counter=shared_counter()).current.config.ledger.key_prefix == "other"
    )  # a restart applies it


def test_store_counts_a_runtime_that_cannot_be_built_as_rejected(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_config(tmp_path / "g.yaml", make_config())
    store = ConfigStore(path, counter=shared_counter())
    first = store.current

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("vocabulary gone")

    monkeypatch.setattr("gateway.config.reload.build_runtime", broken)
    with pytest.raises(ConfigError, match="RuntimeError: vocabulary gone"):
        store.reload()
    assert store.current is first
    assert store.reload_failures == 1
    assert store.last_error is not None and "vocabulary gone" in store.last_error


async def _wait_until(condition: Callable[[], bool]) -> None:
    with anyio.fail_after(5):
        while not condition():
            await anyio.sleep(0.01)


@pytest.mark.anyio
async def test_watch_survives_rejected_files_and_applies_the_next_good_one(tmp_path: Path) -> None:
    path = write_config(tmp_path / "g.yaml", make_config())
    store = ConfigStore(path, counter=shared_counter())
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(store.watch, 0.01)
        config = make_config()
        config["models"]["small"]["encoding"] = "p50k_base"
        write_config(path, config)
        await _wait_until(lambda: store.reload_failures == 1)
        assert store.last_error is not None and "models.small.encoding" in store.last_error
        write_config(path, make_config(ledger={"key_prefix": "other"}))
        await _wait_until(lambda: store.reload_failures == 2)
        config = make_config()
        config["models"]["watched"] = {"provider": "mock"}
        write_config(path, config)
        await _wait_until(lambda: "watched" in store.current.routes)
        tasks.cancel_scope.cancel()
    assert (store.reloads, store.reload_failures, store.last_error) == (1, 2, None)


@pytest.mark.anyio
async def test_watch_counts_an_unexpected_error_and_keeps_watching(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_config(tmp_path / "g.yaml", make_config())
    store = ConfigStore(path, counter=shared_counter())
    failures = iter([OSError("disk gone")])

    def changed() -> bool:
        for error in failures:
            raise error
        return ConfigStore.changed(store)

    monkeypatch.setattr(store, "changed", changed)
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(store.watch, 0.01)
        await _wait_until(lambda: store.reload_failures == 1)
        assert store.last_error is not None and "OSError: disk gone" in store.last_error
        config = make_config()
        config["models"]["watched"] = {"provider": "mock"}
        write_config(path, config)
        await _wait_until(lambda: "watched" in store.current.routes)
        tasks.cancel_scope.cancel()
    assert store.reloads == 1


def test_check_config_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = write_config(tmp_path / "good.yaml", make_config())
    assert main(["check-config", str(good)]) == 0
    assert f"{good}: valid" in capsys.readouterr().out
    bad = tmp_path / "bad.yaml"
    bad.write_text("providers: {}\nmodels:\n  m: {provider: p}\n")
    assert main(["check-config", str(bad)]) == 1
    assert "unknown provider 'p'" in capsys.readouterr().out


def test_check_config_warns_of_a_tenant_whose_keys_resolve_to_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("COPIED_TENANT_KEY", raising=False)
    config = make_config()
    config["tenants"]["acme"]["keys"] = ["${COPIED_TENANT_KEY:-}"]
    path = write_config(tmp_path / "copy.yaml", config)
    assert main(["check-config", str(path)]) == 0  # valid, but nobody can use tenant acme
    out = capsys.readouterr().out
    assert f"{path}: valid (1 warning)" in out
    assert (
        "  warning: tenant acme has no usable key: its key is empty (COPIED_TENANT_KEY unset or empty); "
        "its requests will get 401"
    ) in out
    assert "  tenant acme: 0 of 1 key(s) set" in out
    assert "  provider mock: http://upstream.test/v1 (API key set)" in out


def test_check_config_notes_rather_than_warns_of_the_key_bin_run_makes(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DEFAULT_TENANT_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert main(["check-config", str(EXAMPLE)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{EXAMPLE}: valid\n")  # no warning counted
    assert "  warning: " not in out
    assert (
        "  note: tenant default takes its key from DEFAULT_TENANT_KEY, unset here: ./bin/run makes one"
    ) in out


def test_check_config_says_the_compression_target_is_a_cap(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check-config", str(EXAMPLE)]) == 0
    out = capsys.readouterr().out
    assert "aiming at" not in out
    assert "into a request of at most 75000 tokens" in out


def test_check_config_rejects_an_unknown_encoding(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = make_config()
    config["models"]["small"]["encoding"] = "p50k_base"
    bad = write_config(tmp_path / "bad.yaml", config)
    assert main(["check-config", str(bad)]) == 1
    assert "models.small.encoding: unknown encoding 'p50k_base'" in capsys.readouterr().out


def test_hash_key_command(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("secret\n"))
    assert main(["hash-key"]) == 0
    assert capsys.readouterr().out.strip() == (
        "sha256:2bb80d537b1da3e38bd30361aa855686bde0eacd7162fef6a25fe97bf527a25b"
    )


@pytest.mark.parametrize("path", ["/**", "/*", "/*/content", "/*/**"])
def test_a_passthrough_entry_matching_any_first_segment_must_name_its_tenants(path: str) -> None:
    """``/*`` and ``/**`` reach /files and /batches too: without tenants they are refused at the line."""
    text = f"providers: {{}}\nmodels: {{}}\npassthrough:\n  - path: /moderations\n  - path: {path}\n"
    with pytest.raises(ConfigError) as caught:
        parse_config(text, Path("g.yaml"), {})
    [problem] = caught.value.problems
    assert problem.startswith("g.yaml:5: passthrough.1.tenants: ")
    assert "matches any first path segment" in problem and "name the tenants granted them" in problem
    granted = text.replace(f"path: {path}\n", f"path: {path}\n    tenants: [one]\n")
    granted += "tenants:\n  one: {keys: ['sha256:" + "0" * 64 + "']}\n"
    assert parse_config(granted, Path("g.yaml"), {}).passthrough[1].tenants == ("one",)


def test_a_passthrough_entry_under_a_named_path_needs_no_tenants() -> None:
    text = "providers: {}\nmodels: {}\npassthrough:\n  - path: /moderations/*\n  - path: /audio/**\n"
    assert len(parse_config(text, Path("g.yaml"), {}).passthrough) == 2
