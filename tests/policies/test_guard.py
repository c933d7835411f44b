"""Over the cliff with ``allow_over_cliff``: a turn never costs more than forwarding it at its tier."""

from __future__ import annotations

from typing import Any

import pytest

from policies import Action
from policies.facts import CacheFacts, ModelFacts

from .factories import MODELS, make_engine, make_facts, make_section

C, R, F = Action.COMPRESS, Action.RETRIEVE, Action.FORWARD
PRICED = {
    **MODELS,
    "gpt-5.4": ModelFacts(
        context_window=1_050_000,
        tier_threshold=272_000,
        input_price=2.5,
        cached_input_price=0.25,
        output_price=15.0,
        tier_input_multiplier=2.0,
        tier_cached_multiplier=2.0,
    ),
    "gpt-5.4-mini": ModelFacts(
        context_window=400_000, input_price=0.25, cached_input_price=0.025, output_price=2.0
    ),
}
WARM = CacheFacts(warm=True, cached_tokens=320_000, growth_tokens=8_000)


def decide(cache: CacheFacts, *, allow: bool = True, share: float = 0.9, tokens: int = 328_000) -> Any:
    section = make_section(
        default={
            "name": "default",
            "allow_over_cliff": allow,
            "compress": {"cheap_model": "gpt-5.4-mini"},
        }
    )
    facts = make_facts(prompt_tokens=tokens, cache=cache, history_share=share)
    return make_engine(section, models=PRICED).decide(facts)


def test_a_warm_request_whose_compaction_costs_more_is_forwarded_at_the_tier() -> None:
    """328K, 320K cached at twice the price ($0.20) against a fresh compaction: 29K uncached and the
    cheap calls reading 299K and writing seven summaries ($0.20 and more)."""
    decision = decide(WARM)
    assert (decision.action, decision.transforms, decision.above_cliff) == (F, (), True)
    assert (decision.reason or "").startswith("forwarded over the cliff (allow_over_cliff): at the tier $0.2")
    assert any("billed at the higher tier" in warning for warning in decision.warnings)


@pytest.mark.parametrize(
    ("cache", "allow", "transforms"),
    [
        (WARM, False, (C, R)),  # the invariant wins: nothing over the cliff
        (CacheFacts(warm=False, growth_tokens=8_000), True, (C, R)),  # cold: forwarding is no cheaper
        # a compacted prefix reused costs a fraction of forwarding
        (CacheFacts(warm=True, cached_tokens=60_000, growth_tokens=8_000, compacted=True), True, (C, R)),
    ],
)
def test_otherwise_the_transform_runs(cache: CacheFacts, allow: bool, transforms: tuple[Action, ...]) -> None:
    decision = decide(cache, allow=allow)
    assert decision.transforms == transforms and not decision.above_cliff


def test_a_document_retrieved_within_its_budget_costs_less_than_forwarding() -> None:
    """Excerpts within 125K tokens, uncached ($0.31), against 1M cached at the tier ($0.50 and more)."""
    cache = CacheFacts(warm=True, cached_tokens=990_000, growth_tokens=1_000)
    assert decide(cache, share=0.05, tokens=1_000_000).transforms == (R,)
    small = CacheFacts(warm=True, cached_tokens=290_000, growth_tokens=1_000)
    assert decide(small, share=0.05, tokens=300_000).action is F  # $0.15 at the tier against $0.31
