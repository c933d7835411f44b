from __future__ import annotations

from typing import Any

import pytest

from policies import PoliciesConfig, PolicyConfigError, Problem

from .factories import MODELS, make_engine, make_section


def problems_of(section: dict[str, Any], **options: Any) -> list[Problem]:
    with pytest.raises(PolicyConfigError) as caught:
        make_engine(section, **options)
    return list(caught.value.problems)


def test_validate_against_lists_every_unknown_name_at_once() -> None:
    section = make_section(
        bands={"claude-*": {"warning_tokens": 100}},
        rules=[
            {
                "name": "r",
                "match": {"models": ["gpt-5.4", "gemini-*"], "tenants": ["acme", "initech"]},
                "actions": {"over_cliff": "reroute"},
                "reroute": {"model": "long-cheap"},
                "compress": {"cheap_model": "nano"},
            }
        ],
        default={"retrieve": {"hybrid": True, "embedding_model": "embed-small"}},
    )
    problems = problems_of(section, tenants=["acme"])
    assert [(problem.loc, problem.message) for problem in problems] == [
        (("policies", "bands", "claude-*"), "glob 'claude-*' matches no model"),
        (("policies", "rules", 0, "compress", "cheap_model"), "unknown model 'nano'"),
        (("policies", "rules", 0, "reroute", "model"), "unknown model 'long-cheap'"),
        (("policies", "rules", 0, "match", "models", 1), "'gemini-*' matches no model"),
        (("policies", "rules", 0, "match", "tenants", 1), "'initech' matches no tenant"),
        (("policies", "default", "retrieve", "embedding_model"), "unknown model 'embed-small'"),
    ]


def test_validate_against_accepts_known_names() -> None:
    config = PoliciesConfig.model_validate(
        make_section(
            rules=[{"name": "r", "match": {"tenants": ["ac*"]}, "compress": {"cheap_model": "gpt-5.4-mini"}}],
            default={"retrieve": {"hybrid": True, "embedding_model": "embed-small"}},
        )
    )
    config.validate_against(MODELS, embedding_models=["embed-small"], tenants=["acme"])
    with pytest.raises(PolicyConfigError):
        config.validate_against(MODELS)


def test_validate_against_skips_tenant_globs_when_tenants_are_not_given() -> None:
    config = PoliciesConfig.model_validate(
        make_section(rules=[{"name": "r", "match": {"tenants": ["nobody"]}}])
    )
    config.validate_against(MODELS)


def test_engine_rejects_a_budget_not_below_the_warning_line_of_a_matched_model() -> None:
    problems = problems_of(make_section(default={"retrieve": {"budget_tokens": 200_000}}))
    assert [str(problem) for problem in problems] == [
        "policies.default.retrieve.budget_tokens: "
        "200000 is not below the warning line 128000 of model 'small'"
    ]


def test_engine_checks_budgets_only_against_the_models_a_rule_can_match() -> None:
    rule = {"name": "big", "match": {"models": ["gpt-5*"]}, "retrieve": {"budget_tokens": 200_000}}
    engine = make_engine(make_section(rules=[rule]))
    assert engine.policies[0].retrieve["gpt-5.4"].budget_tokens == 200_000
    assert "small" not in engine.policies[0].retrieve


def test_engine_rejects_a_compress_target_at_the_warning_line() -> None:
    problems = problems_of(make_section(default={"compress": {"target_tokens": 250_000}}))
    assert {problem.loc for problem in problems} == {("policies", "default", "compress", "target_tokens")}
    assert len(problems) == 3  # gpt-5.4, gpt-5.5 (250,000) and small (128,000)


def test_engine_reports_band_problems_of_every_model() -> None:
    problems = problems_of(make_section(bands={"*": {"cliff_tokens": 500_000}}))
    assert [problem.message for problem in problems] == [
        "500000 is above the context window 400000 of model 'gpt-5.4-mini'",
        "500000 is above the context window 128000 of model 'small'",
    ]


def test_policy_config_error_renders_every_problem_on_its_own_line() -> None:
    error = PolicyConfigError(
        [Problem(("policies", "rules", 2, "reroute"), "a"), Problem(("policies",), "b")]
    )
    assert str(error) == "policies.rules.2.reroute: a\npolicies: b"
    assert isinstance(error, ValueError)
