"""How long a compacted conversation reuses its cached prefix: the economic order quantity of its growth
and prices, between the compress target and the cliff (``policies.reuse``)."""

from __future__ import annotations

import math
from typing import Any

import pytest

from policies.facts import CacheFacts, ModelFacts
from policies.reuse import compacted_size

from .factories import MODELS, make_engine, make_facts, make_section

PRICED = {
    **MODELS,
    "gpt-5.4": ModelFacts(
        context_window=1_050_000, tier_threshold=272_000, input_price=2.5, cached_input_price=0.25
    ),
}


def decided(tokens: int, cache: CacheFacts, timing: str = "deferred") -> Any:
    section = make_section(default={"name": "default", "compress": {"timing": timing}})
    return make_engine(section, models=PRICED).decide(make_facts(prompt_tokens=tokens, cache=cache))


def expected_limit(settings: Any, growth: int) -> int:
    price, cached = 2.5, 0.25
    size = compacted_size(settings)
    return int(size + math.sqrt(2 * size * growth * (price - cached) / cached))


def test_a_compacted_conversation_is_reused_up_to_the_order_quantity_of_its_growth() -> None:
    slow = decided(300_000, CacheFacts(warm=True, compacted=True, growth_tokens=10_000)).compress
    fast = decided(300_000, CacheFacts(warm=True, compacted=True, growth_tokens=20_000)).compress
    assert slow.reuse_tokens == expected_limit(slow, 10_000)
    assert fast.reuse_tokens == expected_limit(fast, 20_000)
    # twice the growth: the pile it may reach grows by sqrt(2), so it is extended less often per token
    assert slow.target_tokens < slow.reuse_tokens < fast.reuse_tokens < slow.accept_tokens
    pile = slow.reuse_tokens - compacted_size(slow)
    assert fast.reuse_tokens - compacted_size(fast) == pytest.approx(pile * math.sqrt(2), abs=2)


@pytest.mark.parametrize(
    ("cache", "timing"),
    [
        (CacheFacts(warm=True, compacted=True, growth_tokens=None), "deferred"),  # growth unknown
        (CacheFacts(warm=True, compacted=False, growth_tokens=10_000), "deferred"),  # not compacted
        (CacheFacts(warm=True, compacted=True, growth_tokens=10_000), "eager"),  # eager: the target
    ],
)
def test_without_growth_compaction_or_the_deferred_timing_the_policy_limit_stands(
    cache: CacheFacts, timing: str
) -> None:
    assert decided(300_000, cache, timing).compress.reuse_tokens == 0


def test_the_limit_stays_between_the_target_and_the_cliff() -> None:
    huge = decided(300_000, CacheFacts(warm=True, compacted=True, growth_tokens=10_000_000)).compress
    tiny = decided(300_000, CacheFacts(warm=True, compacted=True, growth_tokens=1)).compress
    assert huge.reuse_tokens == huge.accept_tokens == decided(1, CacheFacts(warm=False)).bands.cliff
    assert tiny.reuse_tokens == tiny.target_tokens
