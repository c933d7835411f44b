"""The margin of a count: a number of tokens for an exact count, a share of it for an estimate (Claude's
prompts counted with o200k), and the top of an estimate's error band to decide on when it is unconfirmed."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from policies import Action, Band, ModelFacts, PoliciesConfig
from policies.margin import CountMargin
from policies.schema import DEFAULT_ESTIMATE_RATIO

from .factories import MODELS, make_engine, make_facts, make_section

CLAUDE = "claude-sonnet-4-5"
MODELS_WITH_CLAUDE = {
    **MODELS,
    CLAUDE: ModelFacts(context_window=1_000_000, tier_threshold=200_000, max_output_tokens=64_000),
}
SHIPPED = CountMargin(tokens=4_096, ratio=DEFAULT_ESTIMATE_RATIO)


def test_an_estimate_of_178k_under_a_200k_tier_is_near_its_lines_an_exact_count_is_not() -> None:
    bands = make_engine(models=MODELS_WITH_CLAUDE).bands[CLAUDE]
    assert (bands.warning, bands.cliff) == (183_823, 200_000)
    assert SHIPPED.near_line(bands, 178_000, estimated=True)
    assert not SHIPPED.near_line(bands, 178_000, estimated=False)  # 5,823 from the warning line
    assert SHIPPED.of(178_000, estimated=True) == 35_600
    assert SHIPPED.of(178_000, estimated=False) == 4_096


def test_an_unconfirmed_estimate_is_decided_at_the_top_of_its_band_over_the_tier() -> None:
    engine = make_engine(models=MODELS_WITH_CLAUDE)
    top = SHIPPED.top(178_000, estimated=True)
    assert top == 213_600  # the 207K the provider billed for such an estimate lies within it
    over = engine.decide(make_facts(model=CLAUDE, prompt_tokens=top))
    assert over.band is Band.OVER_CLIFF and over.action is Action.RETRIEVE
    assert SHIPPED.top(178_000, estimated=False) == 178_000
    exact = engine.decide(make_facts(model=CLAUDE, prompt_tokens=178_000))
    assert exact.band is Band.BELOW_WARNING and exact.action is Action.FORWARD


def test_a_small_estimate_keeps_the_token_margin() -> None:
    assert SHIPPED.of(10_000, estimated=True) == 4_096
    assert SHIPPED.top(10_000, estimated=True) == 12_000


@pytest.mark.parametrize(("tokens", "near"), [(149_999, False), (150_000, True), (240_000, True)])
def test_an_estimate_is_near_the_cliff_within_its_share(tokens: int, near: bool) -> None:
    bands = make_engine(
        models=MODELS_WITH_CLAUDE, section=make_section(bands={CLAUDE: {"warning_tokens": 2}})
    )
    assert CountMargin(ratio=1 / 3).near_line(bands.bands[CLAUDE], tokens, estimated=True) is near


def test_decisions_carry_the_policys_ratio_and_the_shipped_default() -> None:
    section = make_section(
        rules=[{"name": "wide", "match": {"tenants": ["wide"]}, "confirm_within_ratio": 0.3}]
    )
    engine = make_engine(section, models=MODELS_WITH_CLAUDE)
    assert engine.decide(make_facts(tenant="wide", model=CLAUDE)).margin == CountMargin(
        tokens=4_096, ratio=0.3
    )
    assert engine.decide(make_facts(model=CLAUDE)).margin == SHIPPED


@pytest.mark.parametrize("ratio", [-0.1, 1.0])
def test_the_ratio_is_a_share_below_one(ratio: float) -> None:
    with pytest.raises(ValidationError, match="confirm_within_ratio"):
        PoliciesConfig.model_validate(
            make_section(default={"name": "default", "confirm_within_ratio": ratio})
        )


def test_the_warning_of_an_unconfirmed_estimate_names_both_counts() -> None:
    assert SHIPPED.unconfirmed(178_000) == (
        "input tokens estimated at 178000, unconfirmed by the provider: decided as 213600 "
        "(confirm_within_ratio 0.2)"
    )
