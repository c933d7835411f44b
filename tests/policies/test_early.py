"""Compaction below the warning line: a warm, growing conversation is compacted once that pays
(``compress.compact_early``), and a compacted one keeps its compaction there."""

from __future__ import annotations

from typing import Any

import pytest

from policies import Action
from policies.facts import CacheFacts, ModelFacts

from .factories import MODELS, WARNING, make_engine, make_facts, make_section

C, F = Action.COMPRESS, Action.FORWARD
PRICED = {
    **MODELS,
    "gpt-5.4": ModelFacts(
        context_window=1_050_000,
        tier_threshold=272_000,
        input_price=2.5,
        cached_input_price=0.25,
        output_price=15.0,
    ),
    "gpt-5.4-mini": ModelFacts(
        context_window=400_000, input_price=0.25, cached_input_price=0.025, output_price=2.0
    ),
}
CHAT = CacheFacts(warm=True, cached_tokens=94_000, growth_tokens=9_500)
"""A chat growing about 10K tokens a turn, warm, its previous turn cached."""


def decide(tokens: int, cache: CacheFacts | None, *, models: Any = PRICED, **compress: Any) -> Any:
    section = make_section(
        default={"name": "default", "compress": {"cheap_model": "gpt-5.4-mini", **compress}}
    )
    return make_engine(section, models=models).decide(make_facts(prompt_tokens=tokens, cache=cache))


def test_a_warm_growing_chat_is_compacted_below_the_warning_line_once_it_pays() -> None:
    decision = decide(104_000, CHAT)
    assert (decision.action, decision.transforms) == (C, (C,))
    reason = decision.reason or ""
    assert reason.startswith("compacted early: it pays (forward $0.0")
    assert "with its summary calls" in reason
    assert "branch back to an earlier turn resends its history uncached" in reason


@pytest.mark.parametrize(
    ("tokens", "cache", "why"),
    [
        (80_000, CHAT, "below the compaction point"),  # the pile does not yet pay for a rewrite
        (104_000, CacheFacts(warm=False, growth_tokens=9_500), "cold"),
        (104_000, CacheFacts(warm=True, cached_tokens=94_000), "growth unknown"),
        (104_000, None, "unknown conversation"),
    ],
)
def test_a_small_cold_or_unknown_conversation_is_forwarded(
    tokens: int, cache: CacheFacts | None, why: str
) -> None:
    decision = decide(tokens, cache)
    assert (decision.action, decision.transforms) == (F, ()), why


def test_the_summary_calls_are_counted_so_a_turn_before_the_line_is_forwarded() -> None:
    """Just under the line the forwarding path compacts a turn later anyway: the one turn saved does not
    pay for the cheap calls reading 200K tokens and writing their summaries."""
    cache = CacheFacts(warm=True, cached_tokens=230_000, growth_tokens=9_500)
    assert decide(240_000, cache).action is F
    free_output = {**PRICED, "gpt-5.4-mini": ModelFacts(context_window=400_000, input_price=0.25)}
    assert decide(240_000, cache, models=free_output).action is C


def test_early_compaction_can_be_turned_off_and_needs_prices() -> None:
    assert decide(104_000, CHAT, compact_early=False).action is F
    assert decide(104_000, CHAT, models=MODELS).action is F
    assert decide(104_000, CHAT, timing="eager").action is F


def test_a_compacted_conversation_keeps_its_compaction_below_the_line() -> None:
    compacted = CacheFacts(warm=True, cached_tokens=30_000, growth_tokens=9_500, compacted=True)
    decision = decide(120_000, compacted, models=MODELS)
    assert (decision.action, decision.transforms) == (C, (C,))
    assert "compacted prefix is kept" in (decision.reason or "")
    assert decide(120_000, compacted, compact_early=False).action is F


def test_the_engine_weighs_conversations_from_the_smallest_early_target() -> None:
    early = make_engine(make_section(), models=PRICED)
    assert early.conversation_from("gpt-5.4") == 75_000
    late = make_engine(
        make_section(default={"name": "default", "compress": {"compact_early": False}}), models=PRICED
    )
    assert late.conversation_from("gpt-5.4") == WARNING
    assert late.conversation_from("unknown") is None


def test_an_early_compaction_that_fails_forwards_the_request_as_received() -> None:
    section = make_section(
        default={"name": "default", "compress": {"cheap_model": "gpt-5.4-mini", "on_failure": "retrieve"}}
    )
    engine = make_engine(section, models=PRICED)
    facts = make_facts(prompt_tokens=104_000, cache=CHAT)
    decision = engine.decide(facts)
    assert decision.transforms == (C,)
    failed = engine.after_failure(decision, facts, reason="the cheap model is down")
    assert (failed.action, failed.transforms, failed.tokens) == (F, (), 104_000)
    assert any("sent as it stands" in warning for warning in failed.warnings)


def test_an_agent_is_judged_by_its_mean_growth_not_its_last_small_turn() -> None:
    """A tool loop adds ~40K a round and a few hundred tokens with each user turn: after such a turn, at
    82K, its last step says nothing of how fast it grows."""
    small_turn = CacheFacts(warm=True, cached_tokens=81_500, growth_tokens=500)
    assert decide(82_000, small_turn).action is C  # judged on the small step alone
    agent = CacheFacts(warm=True, cached_tokens=81_500, growth_tokens=500, mean_growth_tokens=40_000)
    decision = decide(82_000, agent)
    assert decision.action is F
