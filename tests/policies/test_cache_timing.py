"""When the warning band compresses: the conversation's cache state decides (``compress.timing``)."""

from __future__ import annotations

from typing import Any

import pytest

from policies import Action
from policies.facts import CacheFacts, ModelFacts, Strategy
from policies.reuse import compacted_size

from .factories import MODELS, make_engine, make_facts, make_section

C, R, F = Action.COMPRESS, Action.RETRIEVE, Action.FORWARD
CODEX = "You are performing a CONTEXT CHECKPOINT COMPACTION. Create a handoff summary for another model."


def decide(tokens: int, *, cache: CacheFacts | None, timing: str = "deferred", **facts: Any) -> Any:
    engine = make_engine(make_section(default={"name": "default", "compress": {"timing": timing}}))
    return engine.decide(make_facts(prompt_tokens=tokens, cache=cache, **facts))


WARM = CacheFacts(warm=True, cached_tokens=250_000, growth_tokens=5_000)


def test_a_warm_conversation_in_the_band_is_forwarded_and_its_summary_is_not_yet_prepared() -> None:
    decision = decide(255_000, cache=WARM)
    assert (decision.action, decision.transforms, decision.precompress) == (F, (), False)
    assert decision.reason is not None and decision.reason.startswith("deferred: cache warm")
    assert any("warning line" in warning for warning in decision.warnings)


def test_the_summary_is_prepared_from_when_the_next_turn_would_cross() -> None:
    cache = CacheFacts(warm=True, cached_tokens=250_000, growth_tokens=20_000)
    decision = decide(260_000, cache=cache)
    assert (decision.action, decision.precompress) == (F, True)
    assert "summary prepared for the crossing" in (decision.reason or "")


def test_the_summary_is_not_prepared_on_a_guess_when_the_growth_is_unknown() -> None:
    """A prepared summary is spent whether or not the crossing comes (a branch, another model)."""
    decision = decide(260_000, cache=CacheFacts(warm=True, cached_tokens=250_000))
    assert (decision.action, decision.precompress) == (F, False)
    assert "summary prepared" not in (decision.reason or "")


@pytest.mark.parametrize(
    ("spent", "cap", "prepared"),
    [
        (0.0, None, True),
        (0.0, 0.5, True),  # the cheap model reading the 185K it summarises at $0.25/M: about $0.05
        (0.47, 0.5, False),  # with what was spent already, over the cap
        (0.45, None, True),
        (0.0, 0.01, False),
    ],
)
def test_pre_compression_keeps_within_its_spend_cap_per_conversation(
    spent: float, cap: float | None, prepared: bool
) -> None:
    cache = CacheFacts(warm=True, cached_tokens=250_000, growth_tokens=20_000, precompressed_usd=spent)
    section = make_section(
        default={
            "name": "default",
            "compress": {
                "cheap_model": "gpt-5.4-mini",
                "precompress_max_usd": cap,
                "keep_recent_tokens": 70_000,
            },
        }
    )
    decision = make_engine(section, models=PRICED).decide(make_facts(prompt_tokens=260_000, cache=cache))
    assert (decision.action, decision.precompress) == (F, prepared)
    if not prepared:
        assert "pre-compression spend is at its cap" in (decision.reason or "")


def test_precompress_at_keeps_within_the_spend_cap_too() -> None:
    compress = {"cheap_model": "gpt-5.4-mini", "precompress_at": 100_000, "precompress_max_usd": 0.1}
    engine = make_engine(make_section(default={"name": "default", "compress": compress}), models=PRICED)
    fresh = engine.decide(make_facts(prompt_tokens=150_000))
    assert fresh.precompress
    spent = CacheFacts(warm=False, precompressed_usd=0.09)
    assert not engine.decide(make_facts(prompt_tokens=150_000, cache=spent)).precompress


@pytest.mark.parametrize(
    ("cache", "reason"),
    [
        (CacheFacts(warm=False, growth_tokens=5_000), "cache has gone cold"),
        (None, "no warm cache known"),
        (CacheFacts(warm=True, compacted=True), "compacted prefix is reused"),
    ],
)
def test_a_cold_unknown_or_compacted_conversation_is_compressed_now(
    cache: CacheFacts | None, reason: str
) -> None:
    decision = decide(255_000, cache=cache)
    assert (decision.action, decision.transforms) == (C, (C,))
    assert reason in (decision.reason or "")


def test_eager_timing_compresses_a_warm_conversation_as_before() -> None:
    decision = decide(255_000, cache=WARM, timing="eager")
    assert (decision.action, decision.transforms, decision.reason) == (C, (C,), None)


def test_a_clients_own_compaction_is_forwarded_under_the_cliff_even_when_cold() -> None:
    decision = decide(265_000, cache=None, latest_instruction=CODEX)
    assert (decision.action, decision.transforms) == (F, ())
    assert "client compaction" in (decision.reason or "")


def test_a_clients_own_compaction_over_the_cliff_is_summarised_never_excerpted() -> None:
    decision = decide(300_000, cache=WARM, latest_instruction=CODEX, history_share=0.1)
    assert (decision.action, decision.transforms) == (C, (C,))


def test_a_compacted_conversation_over_the_cliff_compresses_first_whatever_its_history_share() -> None:
    compacted = CacheFacts(warm=True, compacted=True)
    decision = decide(300_000, cache=compacted, history_share=0.1)
    assert decision.transforms == (C, R)
    document = decide(300_000, cache=None, history_share=0.1)
    assert document.transforms == (R,)


def test_the_cache_never_sends_a_request_over_the_cliff() -> None:
    decision = decide(280_000, cache=WARM)
    assert decision.transforms and not decision.above_cliff


PRICED = {
    **MODELS,
    "gpt-5.4": ModelFacts(
        context_window=1_050_000, tier_threshold=272_000, input_price=2.5, cached_input_price=0.25
    ),
    "gpt-5.4-mini": ModelFacts(context_window=400_000, input_price=0.25, cached_input_price=0.025),
}


def priced(tokens: int, cache: CacheFacts, **compress: Any) -> Any:
    section = make_section(
        default={"name": "default", "compress": {"cheap_model": "gpt-5.4-mini", **compress}}
    )
    return make_engine(section, models=PRICED).decide(make_facts(prompt_tokens=tokens, cache=cache))


@pytest.mark.parametrize(
    ("cache", "compress", "action"),
    [
        # 29K uncached (+ the cheap model reading 254K) against 10K new + 244K cached: compressing pays
        (CacheFacts(warm=True, cached_tokens=244_000, growth_tokens=9_500), {}, C),
        # a large compaction costs more than the warm prompt, and the next turn stays in the band
        (
            CacheFacts(warm=True, cached_tokens=244_000, growth_tokens=9_500),
            {"keep_recent_tokens": 70_000},
            F,
        ),
        # the same when nearly all of it is cached and nothing is left of the band to save on
        (
            CacheFacts(warm=True, cached_tokens=253_900, growth_tokens=30_000),
            {"keep_recent_tokens": 70_000},
            F,
        ),
    ],
)
def test_a_warm_conversation_is_compressed_in_the_band_only_when_it_pays(
    cache: CacheFacts, compress: dict[str, Any], action: Action
) -> None:
    decision = priced(254_000, cache, **compress)
    assert decision.action is action
    if action is C:
        assert (decision.reason or "").startswith("compressed: it pays now (forward $0.08")
    else:
        assert (decision.reason or "").startswith("deferred: cache warm")


def test_compacted_size_is_the_aim_pins_recall_and_a_summary_within_the_target() -> None:
    section = make_section(default={"name": "default"})
    settings = make_engine(section).decide(make_facts(prompt_tokens=1)).compress
    assert compacted_size(settings) == 15_000 + 8_000 + 2_000 + 4_000
    big = make_engine(make_section(default={"name": "default", "compress": {"keep_recent_tokens": 74_000}}))
    assert compacted_size(big.decide(make_facts(prompt_tokens=1)).compress) == 75_000


@pytest.mark.parametrize(
    ("cache", "share", "transforms"),
    [
        # excerpted last time and warm: retrieved again, even with history the bulk of the prompt
        (CacheFacts(warm=True, strategy=Strategy.RETRIEVE), 0.9, (R,)),
        # compacted last time (its sent prefix no longer warm, the client's is): compressed first
        (CacheFacts(warm=True, strategy=Strategy.COMPRESS), 0.1, (C, R)),
        # cold with switches left: chosen afresh (the switch re-writes nothing cached)
        (CacheFacts(warm=False, strategy=Strategy.RETRIEVE, switches=1), 0.9, (C, R)),
        # cold but switched twice already: kept
        (CacheFacts(warm=False, strategy=Strategy.RETRIEVE, switches=2), 0.9, (R,)),
        (CacheFacts(warm=False, strategy=Strategy.COMPRESS, switches=2), 0.1, (C, R)),
    ],
)
def test_over_the_cliff_a_conversation_keeps_its_strategy(
    cache: CacheFacts, share: float, transforms: tuple[Action, ...]
) -> None:
    decision = decide(300_000, cache=cache, history_share=share)
    assert decision.transforms == transforms


def test_an_excerpted_conversation_is_not_compacted_early() -> None:
    excerpted = CacheFacts(warm=True, cached_tokens=94_000, growth_tokens=9_500, strategy=Strategy.RETRIEVE)
    section = make_section(default={"name": "default", "compress": {"cheap_model": "gpt-5.4-mini"}})
    decision = make_engine(section, models=PRICED).decide(make_facts(prompt_tokens=104_000, cache=excerpted))
    assert decision.action is F


def test_a_branch_after_a_cut_is_never_hidden() -> None:
    branched = CacheFacts(warm=True, cached_tokens=100_000, branched=True)
    decision = decide(237_000, cache=branched)
    assert any("branches from an earlier turn" in warning for warning in decision.warnings)
    assert not any("branches" in warning for warning in decide(237_000, cache=WARM).warnings)
