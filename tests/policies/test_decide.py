from __future__ import annotations

from typing import Any

import pytest

from policies import Action, Band, PoliciesConfig, PolicyEngine, UnknownModel
from policies.schema import BandActions, DefaultPolicyConfig

from .factories import MODELS, make_engine, make_facts, make_section

C, R = Action.COMPRESS, Action.RETRIEVE


@pytest.mark.parametrize(
    ("tokens", "action", "band", "transforms", "warned"),
    [
        (0, Action.FORWARD, Band.BELOW_WARNING, (), False),
        (249_999, Action.FORWARD, Band.BELOW_WARNING, (), False),
        (250_000, C, Band.WARNING, (C,), True),
        (271_999, C, Band.WARNING, (C,), True),
        (272_000, C, Band.WARNING, (C,), True),
        (272_001, R, Band.OVER_CLIFF, (R,), True),
        (1_050_000, R, Band.OVER_CLIFF, (R,), True),
        (1_050_001, R, Band.OVER_WINDOW, (R,), True),
    ],
)
def test_decide_default_policy_at_the_band_edges(
    tokens: int, action: Action, band: Band, transforms: tuple[Action, ...], warned: bool
) -> None:
    decision = make_engine().decide(make_facts(prompt_tokens=tokens))
    assert (decision.action, decision.band, decision.transforms) == (action, band, transforms)
    assert (decision.model, decision.tokens, decision.policy) == ("gpt-5.4", tokens, "default")
    assert decision.proposed is action
    assert decision.rejection is None and not decision.above_cliff
    assert bool(decision.warnings) is warned
    if warned:
        line = {
            Band.WARNING: "reach the warning line",
            Band.OVER_CLIFF: "are over the price cliff",
            Band.OVER_WINDOW: "are over the context window",
        }[band]
        assert decision.warnings[0] == (
            f"{tokens} input tokens {line} of gpt-5.4 "
            "(warning line 250000, price cliff 272000, context window 1050000)"
        )


@pytest.mark.parametrize(
    ("tokens", "action", "band"),
    [
        (127_999, Action.FORWARD, Band.BELOW_WARNING),
        (128_000, C, Band.WARNING),
        (128_001, R, Band.OVER_WINDOW),
    ],
)
def test_decide_untiered_model_forwards_up_to_its_window(tokens: int, action: Action, band: Band) -> None:
    decision = make_engine().decide(make_facts(model="small", prompt_tokens=tokens))
    assert (decision.action, decision.band) == (action, band)


@pytest.mark.parametrize(
    ("share", "threshold", "transforms"),
    [
        (0.5, 0.5, (C, R)),
        (0.9, 0.5, (C, R)),
        (0.49, 0.5, (R,)),
        (0.0, 0.0, (C, R)),
        (1.0, None, (R,)),
    ],
)
def test_decide_over_the_cliff_also_compresses_when_history_is_the_bulk(
    share: float, threshold: float | None, transforms: tuple[Action, ...]
) -> None:
    engine = make_engine(make_section(default={"retrieve": {"compress_history_share": threshold}}))
    decision = engine.decide(make_facts(prompt_tokens=300_000, history_share=share))
    assert (decision.action, decision.transforms) == (R, transforms)


@pytest.mark.parametrize(
    ("model", "target", "budget"),
    [("gpt-5.4", 75_000, 125_000), ("small", 38_400, 64_000), ("gpt-5.4-mini", 120_000, 200_000)],
)
def test_decide_resolves_transform_settings_for_the_model(model: str, target: int, budget: int) -> None:
    decision = make_engine().decide(make_facts(model=model, prompt_tokens=1))
    assert (decision.compress.target_tokens, decision.retrieve.budget_tokens) == (target, budget)


def test_decide_carries_explicit_transform_knobs() -> None:
    section = make_section(
        default={
            "compress": {
                "cheap_model": "gpt-5.4-mini",
                "keep_recent_turns": 3,
                "keep_recent_tokens": 9_000,
                "target_tokens": 100_000,
                "chunk_tokens": 40_000,
                "on_failure": "forward",
            },
            "retrieve": {
                "chunk_tokens_min": 300,
                "chunk_tokens_max": 600,
                "overlap_tokens": 20,
                "document_min_tokens": 4_000,
                "budget_tokens": 50_000,
                "hybrid": True,
                "embedding_model": "gpt-4.1",
                "on_failure": "reject",
            },
        }
    )
    decision = make_engine(section, models={"gpt-5.4": MODELS["gpt-5.4"], **MODELS}).decide(make_facts())
    compress, retrieve = decision.compress, decision.retrieve
    assert (compress.cheap_model, compress.keep_recent_turns, compress.keep_recent_tokens) == (
        "gpt-5.4-mini",
        3,
        9_000,
    )
    assert (compress.target_tokens, compress.chunk_tokens, compress.on_failure) == (
        100_000,
        40_000,
        "forward",
    )
    assert (retrieve.chunk_tokens_min, retrieve.chunk_tokens_max, retrieve.overlap_tokens) == (300, 600, 20)
    assert (retrieve.document_min_tokens, retrieve.budget_tokens) == (4_000, 50_000)
    assert (retrieve.hybrid, retrieve.embedding_model, retrieve.on_failure) == (True, "gpt-4.1", "reject")


RULES: list[dict[str, Any]] = [
    {"name": "acme-research", "match": {"tenants": ["acme"], "headers": {"x-team": "research*"}}},
    {"name": "acme-gpt5", "match": {"tenants": ["acme"], "models": ["gpt-5.*"]}},
    {"name": "gpt5-anyone", "match": {"models": ["gpt-5.*"]}},
    {"name": "beta-tenants", "match": {"tenants": ["beta-*", "gamma"]}},
]


@pytest.mark.parametrize(
    ("tenant", "model", "headers", "policy"),
    [
        ("acme", "gpt-5.4", {"x-team": "research-ml"}, "acme-research"),
        ("acme", "small", {"x-team": "research"}, "acme-research"),
        ("acme", "gpt-5.4", {"x-team": "sales"}, "acme-gpt5"),
        ("acme", "gpt-5.4", {}, "acme-gpt5"),
        ("acme", "gpt-5.4", {"x-team": "Research"}, "acme-gpt5"),
        ("acme", "small", {}, "default"),
        ("initech", "gpt-5.5", {"x-team": "research"}, "gpt5-anyone"),
        ("beta-1", "gpt-4.1", {}, "beta-tenants"),
        ("gamma", "small", {}, "beta-tenants"),
        ("gammas", "small", {}, "default"),
    ],
)
def test_decide_first_matching_rule_wins_in_file_order(
    tenant: str, model: str, headers: dict[str, str], policy: str
) -> None:
    engine = make_engine(make_section(rules=RULES))
    assert engine.decide(make_facts(tenant=tenant, model=model, headers=headers)).policy == policy


def test_decide_order_of_rules_decides_between_overlapping_rules() -> None:
    reversed_engine = make_engine(make_section(rules=[RULES[2], RULES[1]]))
    assert reversed_engine.decide(make_facts(tenant="acme")).policy == "gpt5-anyone"


def test_engine_header_names_are_those_matching_needs() -> None:
    assert make_engine(make_section(rules=RULES)).header_names == {"x-team", "x-gateway-policy"}
    assert make_engine().header_names == {"x-gateway-policy"}


def passthrough(**overrides: Any) -> Any:
    return make_facts(
        headers={"x-gateway-policy": "passthrough"}, tenant_allows_passthrough=True, **overrides
    )


def test_decide_passthrough_granted_forwards_unchanged() -> None:
    decision = make_engine().decide(passthrough(prompt_tokens=260_000))
    assert (decision.action, decision.transforms, decision.model) == (Action.FORWARD, (), "gpt-5.4")
    assert (decision.passthrough, decision.proposed, decision.observe) == (True, C, False)
    assert len(decision.warnings) == 1  # the warning line is still reported


@pytest.mark.parametrize("value", ["Passthrough", " passthrough "])
def test_decide_passthrough_value_ignores_case_and_spaces(value: str) -> None:
    facts = make_facts(
        prompt_tokens=260_000, headers={"x-gateway-policy": value}, tenant_allows_passthrough=True
    )
    assert make_engine().decide(facts).action is Action.FORWARD


def test_decide_passthrough_not_granted_is_ignored_with_a_warning() -> None:
    facts = make_facts(prompt_tokens=260_000, headers={"x-gateway-policy": "passthrough"})
    decision = make_engine().decide(facts)
    assert (decision.action, decision.passthrough) == (C, False)
    assert decision.warnings[-1] == "x-gateway-policy: passthrough ignored: not granted to tenant acme"


def test_decide_unknown_policy_header_value_is_ignored_with_a_warning() -> None:
    facts = make_facts(headers={"x-gateway-policy": "strict"}, tenant_allows_passthrough=True)
    decision = make_engine().decide(facts)
    assert (decision.action, decision.passthrough) == (Action.FORWARD, False)
    assert "the only value understood is passthrough" in decision.warnings[0]


def test_decide_passthrough_yields_to_the_invariant_over_the_cliff() -> None:
    decision = make_engine().decide(passthrough(prompt_tokens=300_000))
    assert (decision.action, decision.transforms, decision.passthrough) == (R, (R,), True)
    assert decision.warnings[-1].startswith(
        "passthrough overridden: 300000 input tokens cannot go to gpt-5.4"
    )


def test_decide_passthrough_over_the_cliff_when_the_policy_allows_it() -> None:
    engine = make_engine(make_section(default={"allow_over_cliff": True}))
    decision = engine.decide(passthrough(prompt_tokens=300_000))
    assert (decision.action, decision.above_cliff, decision.allow_over_cliff) == (Action.FORWARD, True, True)
    assert "above its price cliff of 272000 tokens" in decision.warnings[-1]
    over_window = engine.decide(passthrough(prompt_tokens=1_050_001))
    assert (over_window.action, over_window.transforms) == (R, (R,))


OBSERVE = make_section(default={"mode": "observe"})


@pytest.mark.parametrize(("tokens", "proposed"), [(1_000, Action.FORWARD), (260_000, C), (272_000, C)])
def test_decide_observe_mode_forwards_unchanged_within_the_invariant(tokens: int, proposed: Action) -> None:
    decision = make_engine(OBSERVE).decide(make_facts(prompt_tokens=tokens))
    assert (decision.action, decision.transforms, decision.model, decision.tokens) == (
        Action.FORWARD,
        (),
        "gpt-5.4",
        tokens,
    )
    assert (decision.observe, decision.proposed, decision.above_cliff) == (True, proposed, False)
    observed = [warning for warning in decision.warnings if warning.startswith("observe mode")]
    assert observed == (
        []
        if proposed is Action.FORWARD
        else ["observe mode: policy default would compress; forwarded unchanged"]
    )


def test_decide_observe_mode_yields_to_the_invariant_over_the_cliff() -> None:
    decision = make_engine(OBSERVE).decide(make_facts(prompt_tokens=272_001))
    assert (decision.action, decision.transforms, decision.observe, decision.proposed) == (R, (R,), True, R)
    assert decision.warnings[-1].startswith("observe mode overridden")


def test_decide_observe_mode_with_allow_over_cliff_forwards_over_the_cliff() -> None:
    engine = make_engine(make_section(default={"mode": "observe", "allow_over_cliff": True}))
    decision = engine.decide(make_facts(prompt_tokens=300_000))
    assert (decision.action, decision.above_cliff, decision.proposed) == (Action.FORWARD, True, R)


def test_decide_allow_over_cliff_forwards_with_a_warning_and_the_cliff_flag() -> None:
    engine = make_engine(
        make_section(default={"allow_over_cliff": True, "actions": {"over_cliff": "forward"}})
    )
    decision = engine.decide(make_facts(prompt_tokens=300_000))
    assert (decision.action, decision.transforms, decision.above_cliff) == (Action.FORWARD, (), True)
    assert decision.warnings[-1] == (
        "300000 input tokens go to gpt-5.4 above its price cliff of 272000 tokens (allow_over_cliff): "
        "billed at the higher tier"
    )
    assert engine.decide(make_facts(prompt_tokens=272_000)).above_cliff is False


def reroute_engine(
    target: str, *, on_failure: str = "retrieve", allow: bool = False, band: str = "over_window"
) -> PolicyEngine:
    return make_engine(
        make_section(
            default={
                "actions": {band: "reroute"},
                "reroute": {"model": target},
                "compress": {"on_failure": on_failure},
                "allow_over_cliff": allow,
            }
        )
    )


def test_decide_reroutes_to_a_model_with_a_bigger_window() -> None:
    decision = reroute_engine("gpt-4.1").decide(make_facts(model="small", prompt_tokens=200_000))
    assert (decision.action, decision.model, decision.band) == (Action.REROUTE, "gpt-4.1", Band.OVER_WINDOW)
    assert decision.bands.window == 1_047_576
    assert (decision.transforms, decision.above_cliff, decision.rejection) == ((), False, None)


def test_decide_reroute_target_over_its_cliff_needs_allow_over_cliff() -> None:
    facts = make_facts(model="small", prompt_tokens=300_000)
    allowed = reroute_engine("gpt-5.4", allow=True).decide(facts)
    assert (allowed.action, allowed.model, allowed.above_cliff) == (Action.REROUTE, "gpt-5.4", True)
    refused = reroute_engine("gpt-5.4").decide(facts)
    assert (refused.action, refused.model, refused.transforms) == (R, "small", (R,))
    assert refused.warnings[-1] == (
        "reroute to gpt-5.4 skipped: 300000 input tokens exceed its price cliff (272000); retrieve instead"
    )


def test_decide_reroute_too_big_for_the_target_forwards_when_the_policy_says_forward() -> None:
    engine = reroute_engine("small", on_failure="forward", band="below_warning")
    decision = engine.decide(make_facts(model="gpt-4.1", prompt_tokens=200_000))
    assert (decision.action, decision.model) == (Action.FORWARD, "gpt-4.1")
    assert "exceed its context window (128000); forwarded to gpt-4.1" in decision.warnings[-1]
    fits = engine.decide(make_facts(model="gpt-4.1", prompt_tokens=100_000))
    assert (fits.action, fits.model) == (Action.REROUTE, "small")


def test_decide_reroute_fallback_forward_retrieves_when_forwarding_breaks_the_invariant() -> None:
    engine = reroute_engine("small", on_failure="forward", band="over_cliff")
    decision = engine.decide(make_facts(prompt_tokens=300_000))
    assert (decision.action, decision.model, decision.transforms) == (R, "gpt-5.4", (R,))


def test_decide_reroute_fallback_reject_gives_the_numbers_of_the_target() -> None:
    decision = reroute_engine("small", on_failure="reject").decide(make_facts(prompt_tokens=1_100_000))
    assert decision.action is Action.REJECT
    assert decision.rejection is not None
    assert (decision.rejection.status, decision.rejection.code) == (400, "context_length_exceeded")
    assert decision.rejection.message.startswith(
        "This model's maximum context length is 128000 tokens. "
        "However, your messages resulted in 1100000 tokens"
    )
    assert "reroute target small cannot take the request" in decision.rejection.message


@pytest.mark.parametrize(
    ("band", "tokens", "status", "code", "start"),
    [
        (
            "over_window",
            1_050_001,
            400,
            "context_length_exceeded",
            "This model's maximum context length is 1050000 tokens",
        ),
        ("over_cliff", 300_000, 400, "context_length_exceeded", "This model's price cliff is 272000 tokens"),
        ("warning", 260_000, 400, "context_length_exceeded", "This model's warning line is 250000 tokens"),
        ("below_warning", 1_000, 403, "policy_rejected", "policy default rejects requests to model gpt-5.4"),
    ],
)
def test_decide_reject_carries_status_code_and_numbers(
    band: str, tokens: int, status: int, code: str, start: str
) -> None:
    engine = make_engine(make_section(default={"actions": {band: "reject"}}))
    decision = engine.decide(make_facts(prompt_tokens=tokens))
    assert (decision.action, decision.transforms, decision.above_cliff) == (Action.REJECT, (), False)
    rejection = decision.rejection
    assert rejection is not None
    assert (rejection.status, rejection.code) == (status, code)
    assert rejection.message.startswith(start)
    assert str(tokens) in rejection.message


def test_decide_over_window_message_uses_the_upstream_wording() -> None:
    engine = make_engine(make_section(default={"actions": {"over_window": "reject"}}))
    rejection = engine.decide(make_facts(model="small", prompt_tokens=130_000)).rejection
    assert rejection is not None
    assert rejection.error_type == "invalid_request_error"
    assert rejection.message == (
        "This model's maximum context length is 128000 tokens. "
        "However, your messages resulted in 130000 tokens "
        "(model small, context window 128000, price cliff 128000; "
        "policy default: requests in the over_window band are rejected)."
    )


@pytest.mark.parametrize(
    ("tokens", "precompress"), [(199_999, False), (200_000, True), (249_999, True), (250_000, False)]
)
def test_decide_flags_precompression_once_the_request_reaches_precompress_at(
    tokens: int, precompress: bool
) -> None:
    engine = make_engine(make_section(default={"compress": {"precompress_at": 200_000}}))
    assert engine.decide(make_facts(prompt_tokens=tokens)).precompress is precompress


def test_decide_never_flags_precompression_without_precompress_at() -> None:
    assert make_engine().decide(make_facts(prompt_tokens=249_999)).precompress is False


def test_decide_unknown_model_raises() -> None:
    with pytest.raises(UnknownModel):
        make_engine().decide(make_facts(model="gpt-9"))


def test_decide_never_forwards_over_the_cliff_even_for_an_unvalidated_config() -> None:
    actions = BandActions.model_construct(warning="forward", over_cliff="forward", over_window="forward")
    config = PoliciesConfig.model_construct(
        bands={}, rules=(), default=DefaultPolicyConfig.model_construct(actions=actions)
    )
    engine = PolicyEngine(config, models=MODELS)
    for tokens in (272_001, 1_050_001):
        decision = engine.decide(make_facts(prompt_tokens=tokens))
        assert (decision.action, decision.transforms) == (R, (R,))
        assert decision.warnings[-1].startswith(
            f"forward skipped: {tokens} input tokens exceed the price cliff"
        )
    assert engine.decide(make_facts(prompt_tokens=272_000)).action is Action.FORWARD


def test_decision_is_frozen() -> None:
    decision = make_engine().decide(make_facts())
    with pytest.raises(AttributeError):
        decision.action = Action.REJECT  # type: ignore[misc]


def test_decide_warnings_are_printable_ascii_header_values() -> None:
    facts = make_facts(tenant="k\u00f6ln\r\nx-evil: 1", headers={"x-gateway-policy": "passthrough"})
    [warning] = make_engine().decide(facts).warnings
    assert warning == "x-gateway-policy: passthrough ignored: not granted to tenant k?ln??x-evil: 1"


def test_decisions_carry_their_policys_confirm_margin() -> None:
    section = make_section(
        rules=[{"name": "exact", "match": {"tenants": ["exacting"]}, "confirm_within_tokens": 10_000}]
    )
    engine = make_engine(section)
    assert engine.decide(make_facts(tenant="exacting")).confirm_within == 10_000
    assert engine.decide(make_facts()).confirm_within == 4_096
