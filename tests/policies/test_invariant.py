"""The invariant, over generated configs, model tables, requests and transform outcomes:

a request goes upstream with at most its target model's cliff of input tokens, unless the matching
policy sets ``allow_over_cliff``, or no transform could cut it further and the policy's ``on_exhausted``
is ``forward`` (either way with ``above_cliff`` set and a warning), and never with more than the target
model's context window.
"""

from __future__ import annotations

import fnmatch
from typing import Any

from hypothesis import HealthCheck, event, given, reject, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from policies import Action, Facts, ModelFacts, PoliciesConfig, PolicyConfigError, PolicyEngine
from policies.facts import CacheFacts

ACTIONS = ["forward", "compress", "retrieve", "reroute", "reject"]
TENANTS = ["t0", "t1", "t2"]


@st.composite
def model_tables(draw: st.DrawFn) -> dict[str, ModelFacts]:
    table = {}
    for index in range(draw(st.integers(1, 4))):
        window = draw(st.integers(1_000, 2_000_000))
        tier = draw(st.none() | st.integers(500, window + 1_000))
        table[f"m{index}"] = ModelFacts(context_window=window, tier_threshold=tier)
    return table


@st.composite
def policy_bodies(draw: st.DrawFn, models: list[str]) -> dict[str, Any]:
    allow = draw(st.booleans())
    actions = {
        "below_warning": draw(st.sampled_from(ACTIONS)),
        "warning": draw(st.sampled_from(ACTIONS)),
        "over_cliff": draw(st.sampled_from(ACTIONS if allow else ACTIONS[1:])),
        "over_window": draw(st.sampled_from(ACTIONS[1:])),
    }
    body: dict[str, Any] = {
        "mode": draw(st.sampled_from(["enforce", "observe"])),
        "allow_over_cliff": allow,
        "on_exhausted": draw(st.sampled_from(["forward", "reject"])),
        "actions": actions,
        "compress": {
            "on_failure": draw(st.sampled_from(["retrieve", "forward", "reject"])),
            "target_ratio": draw(st.none() | st.floats(0.01, 0.99)),
            "timing": draw(st.sampled_from(["deferred", "eager"])),
        },
        "retrieve": {
            "on_failure": draw(st.sampled_from(["forward", "reject"])),
            "budget_ratio": draw(st.none() | st.floats(0.01, 0.99)),
            "compress_history_share": draw(st.none() | st.sampled_from([0.0, 0.5, 1.0])),
        },
    }
    if "reroute" in actions.values():
        body["reroute"] = {"model": draw(st.sampled_from(models))}
    return body


@st.composite
def matches(draw: st.DrawFn, models: list[str]) -> dict[str, Any]:
    match: dict[str, Any] = {}
    if draw(st.booleans()):
        match["tenants"] = draw(st.lists(st.sampled_from([*TENANTS, "t*"]), min_size=1, max_size=2))
    if draw(st.booleans()):
        match["models"] = draw(st.lists(st.sampled_from([*models, "m*"]), min_size=1, max_size=2))
    if not match or draw(st.booleans()):
        match["headers"] = {"x-team": draw(st.sampled_from(["a*", "ab", "*"]))}
    return match


@st.composite
def configs(draw: st.DrawFn, models: list[str]) -> dict[str, Any]:
    bands: dict[str, Any] = {}
    for glob in draw(st.lists(st.sampled_from([*models, "m*"]), max_size=2, unique=True)):
        override: dict[str, Any] = {}
        if draw(st.booleans()):
            override["cliff_tokens"] = draw(st.integers(2, 2_000_000))
        warning = draw(st.sampled_from(["tokens", "ratio", None]))
        if warning == "tokens":
            override["warning_tokens"] = draw(st.integers(2, override.get("cliff_tokens", 2_000_000)))
        elif warning == "ratio":
            override["warning_ratio"] = draw(st.floats(0.01, 1.0))
        bands[glob] = override
    rules = [
        {"name": f"rule{index}", "match": draw(matches(models)), **draw(policy_bodies(models))}
        for index in range(draw(st.integers(0, 3)))
    ]
    return {"bands": bands, "rules": rules, "default": draw(policy_bodies(models))}


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[PolicyEngine, PoliciesConfig, dict[str, ModelFacts], Facts]:
    table = draw(model_tables())
    section = draw(configs(list(table)))
    try:
        config = PoliciesConfig.model_validate(section)
        engine = PolicyEngine(config, models=table)
    except (ValidationError, PolicyConfigError):
        reject()
    model = draw(st.sampled_from(list(table)))
    lines = engine.bands[model]
    edges = [lines.warning, lines.cliff, lines.window]
    tokens = draw(
        st.integers(0, 2_500_000)
        | st.sampled_from(edges).flatmap(lambda edge: st.integers(max(0, edge - 1), edge + 1))
    )
    headers: dict[str, str] = {}
    if draw(st.booleans()):
        headers["x-team"] = draw(st.sampled_from(["ab", "abc", "zz"]))
    if draw(st.booleans()):
        headers["x-gateway-policy"] = draw(st.sampled_from(["passthrough", "other"]))
    facts = Facts(
        tenant=draw(st.sampled_from(TENANTS)),
        model=model,
        prompt_tokens=tokens,
        headers=headers,
        tenant_allows_passthrough=draw(st.booleans()),
        history_share=draw(st.floats(0.0, 1.0)),
        cache=draw(
            st.none()
            | st.builds(
                CacheFacts,
                warm=st.booleans(),
                cached_tokens=st.integers(0, 2_000_000),
                growth_tokens=st.none() | st.integers(0, 500_000),
                compacted=st.booleans(),
            )
        ),
        latest_instruction=draw(st.none() | st.sampled_from(["go on", "Please summarize the conversation."])),
    )
    return engine, config, table, facts


def reference_limits(config: PoliciesConfig, table: dict[str, ModelFacts], model: str) -> tuple[int, int]:
    """The cliff and window of ``model``, computed from the config without the engine."""
    facts = table[model]
    window = facts.context_window
    cliff = (
        facts.tier_threshold if facts.tier_threshold is not None and facts.tier_threshold < window else window
    )
    for glob, override in config.bands.items():
        if fnmatch.fnmatchcase(model, glob):
            if override.cliff_tokens is not None:
                cliff = override.cliff_tokens
            break
    return cliff, window


def allows_over_cliff(config: PoliciesConfig, policy: str) -> bool:
    return next(body.allow_over_cliff for _, body in config.bodies() if body.name == policy)


def forwards_exhausted(config: PoliciesConfig, policy: str) -> bool:
    return next(body.on_exhausted == "forward" for _, body in config.bodies() if body.name == policy)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow]
)
@given(scenarios(), st.data())
def test_invariant_holds_for_every_decision_and_every_transform_outcome(
    scenario: tuple[PolicyEngine, PoliciesConfig, dict[str, ModelFacts], Facts], data: st.DataObject
) -> None:
    engine, config, table, facts = scenario
    decision = engine.decide(facts)
    steps = 0
    while decision.transforms:
        steps += 1
        assert steps <= 3, "escalation must end"
        assert decision.model == facts.model, "transforms apply to the requested model"
        assert decision.rejection is None, "a rejection ends the decision"
        if data.draw(st.booleans(), label="fails"):
            decision = engine.after_failure(decision, facts, reason="failed")
        else:
            new_tokens = data.draw(st.integers(0, 2 * decision.tokens + 10), label="new_tokens")
            decision = engine.after_transform(decision, facts, new_tokens)
    event(f"{decision.action} after {steps} transforms, above cliff: {decision.above_cliff}")
    if decision.rejection is not None:
        assert decision.action is Action.REJECT
        return
    assert decision.action is not Action.REJECT
    cliff, window = reference_limits(config, table, decision.model)
    allowed = allows_over_cliff(config, decision.policy)
    assert decision.allow_over_cliff is allowed
    assert decision.tokens <= window
    assert decision.above_cliff is (decision.tokens > cliff)
    if decision.tokens > cliff:
        exhausted = any("(on_exhausted: forward" in warning for warning in decision.warnings)
        assert allowed or (steps > 0 and exhausted and forwards_exhausted(config, decision.policy))
        assert any("above its price cliff" in warning for warning in decision.warnings)
    if not decision.applied:
        assert decision.tokens == facts.prompt_tokens
    if decision.model != facts.model:
        assert decision.action is Action.REROUTE
