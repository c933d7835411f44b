from __future__ import annotations

from typing import Any

from policies import Action, Band, ModelView, describe

from .factories import make_engine, make_section


def test_describe_lists_the_bands_and_actions_of_every_model() -> None:
    views = {view.model: view for view in describe(make_engine())}
    assert list(views) == ["gpt-5.4", "gpt-5.5", "gpt-4.1", "gpt-5.4-mini", "small"]
    gpt = views["gpt-5.4"]
    assert (gpt.bands.warning, gpt.bands.cliff, gpt.bands.window) == (250_000, 272_000, 1_050_000)
    [policy] = gpt.policies
    assert (policy.policy, policy.match, policy.observe) == (
        "default",
        "every request no rule matches",
        False,
    )
    assert [(row.band, row.first, row.last, row.action, row.model) for row in policy.rows] == [
        (Band.BELOW_WARNING, 0, 249_999, Action.FORWARD, "gpt-5.4"),
        (Band.WARNING, 250_000, 272_000, Action.COMPRESS, "gpt-5.4"),
        (Band.OVER_CLIFF, 272_001, 1_050_000, Action.RETRIEVE, "gpt-5.4"),
        (Band.OVER_WINDOW, 1_050_001, None, Action.RETRIEVE, "gpt-5.4"),
    ]
    assert policy.rows[0].detail == (
        "unchanged; a warm, growing conversation compacted once that pays, then kept compacted"
    )
    assert policy.rows[1].detail == (
        "while the cache is warm: forwarded, summary prepared; then summarise old turns with gpt-5.4 "
        "into a request of at most 75000 tokens: the recent 15000 tokens verbatim (at least 2 turns; "
        "tool outputs excerpted above 60000); pins 8000 tokens of the user's own words; recalls 2000 "
        "tokens of old turns; reused up to 272000 tokens; on failure retrieve"
    )
    assert policy.rows[2].detail == (
        "relevant chunks of documents >= 8000 tokens, within 125000 tokens; "
        "compress old turns first when history is >= 50%; "
        "what cannot be cut under the cliff: forwarded, billed at the higher tier"
    )
    rejecting = describe(make_engine(make_section(default={"on_exhausted": "reject"})))[0].policies[0]
    assert rejecting.rows[2].detail.endswith("cannot be cut under the cliff: 400 context_length_exceeded")


def test_describe_skips_the_empty_over_cliff_band_of_untiered_models() -> None:
    small = next(view for view in describe(make_engine()) if view.model == "small")
    assert [row.band for row in small.policies[0].rows] == [
        Band.BELOW_WARNING,
        Band.WARNING,
        Band.OVER_WINDOW,
    ]


def test_describe_shows_only_the_policies_a_model_can_fall_under_in_order() -> None:
    rules = [
        {"name": "gpt5", "match": {"models": ["gpt-5*"], "tenants": ["acme"], "headers": {"x-team": "a*"}}},
        {"name": "anyone", "match": {"tenants": ["beta"]}},
    ]
    views = {view.model: view for view in describe(make_engine(make_section(rules=rules)))}
    assert [policy.policy for policy in views["gpt-5.4"].policies] == ["gpt5", "anyone", "default"]
    assert [policy.policy for policy in views["small"].policies] == ["anyone", "default"]
    assert views["gpt-5.4"].policies[0].match == "tenants acme; models gpt-5*; header x-team a*"


def test_describe_details_reroute_limits_rejects_and_forward_over_the_cliff() -> None:
    default = {
        "allow_over_cliff": True,
        "actions": {
            "warning": "reroute",
            "over_cliff": "forward",
            "over_window": "reject",
            "below_warning": "reject",
        },
        "reroute": {"model": "small"},
        "retrieve": {"compress_history_share": None},
    }
    view = next(
        view for view in describe(make_engine(make_section(default=default))) if view.model == "gpt-5.4"
    )
    rows = {row.band: row for row in view.policies[0].rows}
    assert rows[Band.BELOW_WARNING].detail == "403 policy_rejected"
    assert (rows[Band.WARNING].model, rows[Band.WARNING].detail) == (
        "small",
        "to small (cliff 128000, window 128000); above 128000 tokens: on failure retrieve",
    )
    assert rows[Band.OVER_CLIFF].detail == "unchanged, billed at the higher tier"
    assert rows[Band.OVER_WINDOW].detail == "400 context_length_exceeded"
    assert view.policies[0].allow_over_cliff is True


def model_view(default: dict[str, Any], model: str) -> ModelView:
    return next(view for view in describe(make_engine(make_section(default=default))) if view.model == model)


def test_describe_notes_the_reroute_fallback_only_beyond_the_target_limits() -> None:
    unbounded = model_view({"actions": {"over_window": "reroute"}, "reroute": {"model": "gpt-4.1"}}, "small")
    over_window = next(row for row in unbounded.policies[0].rows if row.band is Band.OVER_WINDOW)
    assert over_window.detail == (
        "to gpt-4.1 (cliff 1047576, window 1047576); above 1047576 tokens: on failure retrieve"
    )
    bounded = model_view({"actions": {"warning": "reroute"}, "reroute": {"model": "gpt-4.1"}}, "small")
    warning = next(row for row in bounded.policies[0].rows if row.band is Band.WARNING)
    assert warning.detail == "to gpt-4.1 (cliff 1047576, window 1047576)"


def test_describe_omits_history_compression_when_disabled() -> None:
    view = model_view({"retrieve": {"compress_history_share": None}}, "small")
    over_window = next(row for row in view.policies[0].rows if row.band is Band.OVER_WINDOW)
    assert over_window.detail == "relevant chunks of documents >= 8000 tokens, within 64000 tokens"


def test_describe_says_what_observe_mode_forwards() -> None:
    view = describe(make_engine(make_section(default={"mode": "observe"})))[0]
    policy = view.policies[0]
    assert policy.observe is True
    assert policy.rows[1].detail.startswith(
        "observe only: forwards unchanged up to 272000 tokens; would compress: "
    )


def test_describe_says_unchanged_below_the_line_without_early_compaction() -> None:
    section = make_section(default={"name": "default", "compress": {"compact_early": False}})
    views = {view.model: view for view in describe(make_engine(section))}
    [policy] = views["gpt-5.4"].policies
    assert policy.rows[0].detail == "unchanged"
