from __future__ import annotations

from collections.abc import Mapping

import pytest

from policies import Band, ModelBands, ModelFacts, PolicyConfigError, TokenBands
from policies.schema import BandOverride

from .factories import LONG_WINDOW, TIER, WARNING


def bands_for(
    facts: ModelFacts, name: str = "gpt-5.4", overrides: Mapping[str, Mapping[str, object]] | None = None
) -> ModelBands:
    rule = TokenBands(
        {glob: BandOverride.model_validate(values) for glob, values in (overrides or {}).items()}
    )
    return rule.for_model(name, facts)


TIERED = ModelFacts(context_window=LONG_WINDOW, tier_threshold=TIER)


@pytest.mark.parametrize(
    ("tokens", "band"),
    [
        (0, Band.BELOW_WARNING),
        (249_999, Band.BELOW_WARNING),
        (250_000, Band.WARNING),
        (271_999, Band.WARNING),
        (272_000, Band.WARNING),
        (272_001, Band.OVER_CLIFF),
        (1_050_000, Band.OVER_CLIFF),
        (1_050_001, Band.OVER_WINDOW),
    ],
)
def test_bands_edges_of_the_272k_tier(tokens: int, band: Band) -> None:
    assert bands_for(TIERED).band_of(tokens) is band


def test_token_bands_default_to_250k_warning_under_a_272k_tier() -> None:
    bands = bands_for(TIERED)
    assert (bands.warning, bands.cliff, bands.window, bands.tiered) == (WARNING, TIER, LONG_WINDOW, True)
    assert bands.override is None


def test_token_bands_scale_the_default_warning_to_other_tiers() -> None:
    bands = bands_for(ModelFacts(context_window=1_000_000, tier_threshold=200_000))
    assert (bands.warning, bands.cliff) == (200_000 * 250 // 272, 200_000)


@pytest.mark.parametrize("tier", [None, 128_000, 500_000])
def test_token_bands_without_an_effective_tier_use_the_window_for_both_lines(tier: int | None) -> None:
    bands = bands_for(ModelFacts(context_window=128_000, tier_threshold=tier), name="small")
    assert (bands.warning, bands.cliff, bands.window, bands.tiered) == (128_000, 128_000, 128_000, False)
    assert bands.band_of(127_999) is Band.BELOW_WARNING
    assert bands.band_of(128_000) is Band.WARNING
    assert bands.band_of(128_001) is Band.OVER_WINDOW


@pytest.mark.parametrize(
    ("override", "warning", "cliff"),
    [
        ({"warning_tokens": 240_000}, 240_000, TIER),
        ({"warning_ratio": 0.9}, 244_800, TIER),
        ({"warning_ratio": 1.0}, TIER, TIER),
        ({"cliff_tokens": 200_000}, 200_000 * 250 // 272, 200_000),
        ({"cliff_tokens": 200_000, "warning_tokens": 150_000}, 150_000, 200_000),
        ({"cliff_tokens": 200_000, "warning_ratio": 0.5}, 100_000, 200_000),
    ],
)
def test_token_bands_apply_overrides(override: dict[str, object], warning: int, cliff: int) -> None:
    bands = bands_for(TIERED, overrides={"gpt-5.4*": override})
    assert (bands.warning, bands.cliff, bands.override) == (warning, cliff, "gpt-5.4*")


def test_token_bands_cliff_override_on_an_untiered_model_places_a_default_warning() -> None:
    bands = bands_for(
        ModelFacts(context_window=1_000_000), name="gpt-4.1", overrides={"gpt-4.1": {"cliff_tokens": 272_000}}
    )
    assert (bands.warning, bands.cliff, bands.tiered) == (WARNING, TIER, True)


def test_token_bands_first_matching_glob_wins() -> None:
    rule = TokenBands(
        {
            "gpt-5.4": BandOverride(warning_tokens=200_000),
            "gpt-*": BandOverride(warning_tokens=100_000),
        }
    )
    assert rule.for_model("gpt-5.4", TIERED).warning == 200_000
    assert rule.for_model("gpt-5.5", TIERED).warning == 100_000
    assert rule.for_model("other", TIERED).warning == WARNING


def test_token_bands_globs_are_case_sensitive() -> None:
    assert bands_for(TIERED, overrides={"GPT-*": {"warning_tokens": 100_000}}).warning == WARNING


@pytest.mark.parametrize(
    ("override", "loc", "fragment"),
    [
        (
            {"cliff_tokens": 2_000_000},
            ("policies", "bands", "gpt*", "cliff_tokens"),
            "above the context window",
        ),
        (
            {"warning_tokens": 300_000},
            ("policies", "bands", "gpt*", "warning_tokens"),
            "above the cliff 272000",
        ),
    ],
)
def test_token_bands_reject_overrides_that_do_not_fit_the_model(
    override: dict[str, object], loc: tuple[str, ...], fragment: str
) -> None:
    with pytest.raises(PolicyConfigError) as caught:
        bands_for(TIERED, overrides={"gpt*": override})
    [problem] = caught.value.problems
    assert problem.loc == loc
    assert fragment in problem.message
    assert "'gpt-5.4'" in problem.message


def test_token_bands_reject_a_window_too_small_for_any_band() -> None:
    with pytest.raises(PolicyConfigError) as caught:
        bands_for(ModelFacts(context_window=1), name="tiny")
    assert caught.value.problems[0].loc == ("models", "tiny", "context_window")


@pytest.mark.parametrize(
    ("tokens", "allow", "admitted"),
    [
        (272_000, False, True),
        (272_001, False, False),
        (272_001, True, True),
        (1_050_000, True, True),
        (1_050_001, True, False),
    ],
)
def test_model_bands_admit_up_to_the_cliff_or_the_window(tokens: int, allow: bool, admitted: bool) -> None:
    assert bands_for(TIERED).admits(tokens, allow_over_cliff=allow) is admitted


def test_model_bands_spans_cover_every_count_once() -> None:
    bands = bands_for(TIERED)
    assert [bands.span(band) for band in Band] == [
        (0, 249_999),
        (250_000, 272_000),
        (272_001, 1_050_000),
        (1_050_001, None),
    ]
    untiered = bands_for(ModelFacts(context_window=128_000), name="small")
    assert untiered.span(Band.OVER_CLIFF) is None


@pytest.mark.parametrize(
    ("tokens", "margin", "near"),
    [
        (245_904, 4_096, True),
        (245_903, 4_096, False),
        (254_096, 4_096, True),
        (261_000, 4_096, False),
        (268_000, 4_096, True),
        (276_096, 4_096, True),
        (276_097, 4_096, False),
        (250_000, 0, False),
    ],
)
def test_near_line_is_within_the_margin_of_either_line(tokens: int, margin: int, near: bool) -> None:
    assert bands_for(TIERED).near_line(tokens, margin) is near
