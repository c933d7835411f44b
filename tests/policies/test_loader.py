from __future__ import annotations

from importlib import resources

import pytest
import yaml
from pydantic import ValidationError

from policies import Action, PoliciesConfig, PolicyEngine, load_default, parse_policies

from .factories import MODELS, make_facts


def test_default_yaml_ships_inside_the_package() -> None:
    text = resources.files("policies").joinpath("default.yaml").read_text(encoding="utf-8")
    assert set(yaml.safe_load(text)) == {"policies"}


def test_load_default_is_the_issue_default_policy() -> None:
    config = load_default()
    assert config.rules == ()
    assert config.default.name == "default"
    assert config.default.actions.model_dump() == {
        "below_warning": "forward",
        "warning": "compress",
        "over_cliff": "retrieve",
        "over_window": "retrieve",
    }
    assert config.default.compress.target_ratio == 0.3
    assert (config.default.compress.keep_recent_turns, config.default.compress.keep_recent_ratio) == (2, 0.2)
    assert config.default.compress.timing == "deferred"
    assert config.default.retrieve.budget_ratio == 0.5


def test_parse_policies_without_a_section_applies_the_shipped_default() -> None:
    assert parse_policies(None) == load_default()


def test_parse_policies_validates_a_section() -> None:
    config = parse_policies({"default": {"name": "house", "mode": "observe"}})
    assert isinstance(config, PoliciesConfig)
    assert (config.default.name, config.default.mode) == ("house", "observe")
    with pytest.raises(ValidationError):
        parse_policies({"rules": []})


def test_load_default_builds_an_engine_for_the_model_table() -> None:
    engine = PolicyEngine(load_default(), models=MODELS)
    assert engine.decide(make_facts(prompt_tokens=260_000)).action is Action.COMPRESS
