from __future__ import annotations

from typing import Any

import pytest

from policies import Action, Decision, Facts, PolicyEngine

from .factories import make_engine, make_facts, make_section

C, R, F = Action.COMPRESS, Action.RETRIEVE, Action.FORWARD


def planned(
    tokens: int, *, history_share: float = 0.0, **default: Any
) -> tuple[PolicyEngine, Facts, Decision]:
    engine = make_engine(make_section(default=default))
    facts = make_facts(prompt_tokens=tokens, history_share=history_share)
    return engine, facts, engine.decide(facts)


@pytest.mark.parametrize(
    ("new_tokens", "action", "transforms", "applied", "extra_warning"),
    [
        (10_000, C, (), (C,), None),
        (150_000, C, (), (C,), None),
        (
            150_001,
            C,
            (),
            (C,),
            "after compress the request has 150001 input tokens, above the target of 150000",
        ),
        (249_999, C, (), (C,), "above the target of 150000"),
        (
            250_000,
            R,
            (R,),
            (C,),
            "after compress the request still has 250000 input tokens (warning line 250000)",
        ),
        (400_000, R, (R,), (C,), "retrieve next"),
    ],
)
def test_after_transform_checks_compression_against_its_target(
    new_tokens: int,
    action: Action,
    transforms: tuple[Action, ...],
    applied: tuple[Action, ...],
    extra_warning: str | None,
) -> None:
    engine, facts, decision = planned(260_000, compress={"timing": "eager", "target_ratio": 0.6})
    assert decision.transforms == (C,)
    after = engine.after_transform(decision, facts, new_tokens)
    assert (after.action, after.transforms, after.applied, after.tokens) == (
        action,
        transforms,
        applied,
        new_tokens,
    )
    assert (after.model, after.rejection, after.above_cliff) == ("gpt-5.4", None, False)
    added = after.warnings[len(decision.warnings) :]
    if extra_warning is None:
        assert added == ()
    else:
        [warning] = added
        assert extra_warning in warning


@pytest.mark.parametrize(
    ("new_tokens", "sent", "missed_target"),
    [
        (125_000, True, False),
        (200_000, True, True),
        (272_000, True, True),
        (272_001, False, False),
    ],
)
def test_after_transform_checks_retrieval_then_rejects_rather_than_crossing_the_cliff(
    new_tokens: int, sent: bool, missed_target: bool
) -> None:
    engine, facts, decision = planned(300_000, on_exhausted="reject")
    after = engine.after_transform(decision, facts, new_tokens)
    assert after.transforms == ()
    assert after.applied == (R,)
    assert after.above_cliff is False
    if sent:
        assert (after.action, after.rejection) == (R, None)
    else:
        assert after.action is Action.REJECT
        assert after.rejection is not None
        assert (after.rejection.status, after.rejection.code) == (400, "context_length_exceeded")
        assert after.rejection.message.startswith(
            "This model's price cliff is 272000 tokens. However, your messages resulted in 272001 tokens"
        )
        assert "retrieve left 272001 of 300000 input tokens" in after.rejection.message
    assert any("above the target of 125000" in warning for warning in after.warnings) is missed_target


def test_after_transform_over_the_cliff_is_sent_only_when_the_policy_allows_it() -> None:
    engine, facts, decision = planned(600_000, allow_over_cliff=True)
    after = engine.after_transform(decision, facts, 300_000)
    assert (after.action, after.above_cliff, after.rejection) == (R, True, None)
    assert "above its price cliff of 272000 tokens" in after.warnings[-1]
    too_big = engine.after_transform(planned(1_100_000, allow_over_cliff=True)[2], facts, 1_060_000)
    assert too_big.rejection is not None
    assert too_big.rejection.message.startswith("This model's maximum context length is 1050000 tokens")


def test_after_transform_drops_retrieval_when_compression_was_enough() -> None:
    engine, facts, decision = planned(300_000, history_share=0.8)
    assert decision.transforms == (C, R)
    after = engine.after_transform(decision, facts, 140_000)
    assert (after.action, after.transforms, after.applied) == (C, (), (C,))


def test_after_transform_runs_retrieval_planned_after_compression() -> None:
    engine, facts, decision = planned(300_000, history_share=0.8, compress={"timing": "eager"})
    after = engine.after_transform(decision, facts, 200_000)
    assert (after.action, after.transforms, after.applied, after.tokens) == (R, (R,), (C,), 200_000)
    final = engine.after_transform(after, facts, 120_000)
    assert (final.action, final.transforms, final.applied, final.tokens) == (R, (), (C, R), 120_000)


def test_after_transform_and_after_failure_need_a_pending_transform() -> None:
    engine, facts, decision = planned(1_000)
    with pytest.raises(ValueError, match="no transform pending"):
        engine.after_transform(decision, facts, 10)
    with pytest.raises(ValueError, match="no transform pending"):
        engine.after_failure(decision, facts, reason="x")


def test_after_failure_of_compression_retrieves_by_default() -> None:
    engine, facts, decision = planned(260_000)
    after = engine.after_failure(decision, facts, reason="cheap model timed out")
    assert (after.action, after.transforms, after.applied, after.tokens) == (R, (R,), (), 260_000)
    assert after.warnings[-1] == "compress failed (cheap model timed out); retrieve next"


def test_after_failure_forward_sends_the_request_when_under_the_cliff() -> None:
    engine, facts, decision = planned(260_000, compress={"on_failure": "forward"})
    after = engine.after_failure(decision, facts, reason="SummaryFailed: no sections")
    assert (after.action, after.transforms, after.model, after.tokens, after.above_cliff) == (
        F,
        (),
        "gpt-5.4",
        260_000,
        False,
    )
    assert after.warnings[-1] == "compress failed (SummaryFailed: no sections); sent as it stands"


def test_after_failure_forward_over_the_cliff_moves_on_to_retrieval() -> None:
    engine, facts, decision = planned(300_000, history_share=0.9, compress={"on_failure": "forward"})
    after = engine.after_failure(decision, facts, reason="boom")
    assert (after.action, after.transforms, after.applied) == (R, (R,), ())
    assert after.warnings[-1] == "compress failed (boom); retrieve next"
    engine, facts, decision = planned(
        300_000, compress={"on_failure": "forward"}, actions={"over_cliff": "compress"}
    )
    assert decision.transforms == (C,)
    assert engine.after_failure(decision, facts, reason="boom").transforms == (R,)


def test_after_failure_forward_over_the_cliff_is_sent_when_the_policy_allows_it() -> None:
    engine, facts, decision = planned(
        300_000, allow_over_cliff=True, compress={"on_failure": "forward"}, actions={"over_cliff": "compress"}
    )
    after = engine.after_failure(decision, facts, reason="boom")
    assert (after.action, after.above_cliff, after.transforms) == (F, True, ())


@pytest.mark.parametrize(
    ("tokens", "step", "default"),
    [
        (260_000, C, {"compress": {"on_failure": "reject"}}),
        (300_000, R, {"retrieve": {"on_failure": "reject"}}),
        (300_000, R, {"retrieve": {"on_failure": "forward"}, "on_exhausted": "reject"}),
    ],
)
def test_after_failure_rejects_with_503_when_nothing_else_keeps_the_invariant(
    tokens: int, step: Action, default: dict[str, Any]
) -> None:
    engine, facts, decision = planned(tokens, **default)
    assert decision.transforms == (step,)
    after = engine.after_failure(decision, facts, reason="embedder down")
    assert (after.action, after.transforms) == (Action.REJECT, ())
    assert after.rejection is not None
    assert (after.rejection.status, after.rejection.error_type) == (503, "service_unavailable")
    assert after.rejection.code == f"{step}_failed"
    assert (
        after.rejection.message
        == f"{step} failed (embedder down); policy default rejects the request; retry later"
    )


def test_a_request_sent_with_no_transform_applied_keeps_no_reason_for_one() -> None:
    engine, facts, decision = planned(260_000, compress={"on_failure": "forward"})  # deferred: a reason
    assert decision.reason is not None and decision.reason.startswith("compressed: ")
    after = engine.after_failure(decision, facts, reason="SummaryFailed: no sections")
    assert (after.action, after.reason) == (F, None)
    compressed = engine.after_transform(decision, facts, 70_000)
    assert (compressed.action, compressed.reason) == (C, decision.reason)


def test_after_failure_of_retrieval_after_compression_sends_the_compressed_request() -> None:
    engine, facts, decision = planned(300_000, history_share=0.9, compress={"timing": "eager"})
    compressed = engine.after_transform(decision, facts, 200_000)
    after = engine.after_failure(compressed, facts, reason="boom")
    assert (after.action, after.transforms, after.applied, after.tokens) == (C, (), (C,), 200_000)


def test_after_failure_chain_ends_when_both_transforms_failed() -> None:
    engine, facts, decision = planned(260_000)
    retrieving = engine.after_failure(decision, facts, reason="a")
    after = engine.after_failure(retrieving, facts, reason="b")
    assert (after.action, after.tokens, after.rejection) == (F, 260_000, None)
    assert after.warnings[-2:] == (
        "compress failed (a); retrieve next",
        "retrieve failed (b); sent as it stands",
    )


@pytest.mark.parametrize(
    ("reason", "shown"),
    [
        ("", "no reason given"),
        ("line one\n  line two", "line one line two"),
        ("x" * 500, "x" * 120),
        ("caf\u00e9 \x00down", "caf? ?down"),
    ],
)
def test_after_failure_keeps_the_reason_on_one_short_line(reason: str, shown: str) -> None:
    engine, facts, decision = planned(260_000)
    assert (
        engine.after_failure(decision, facts, reason=reason).warnings[-1]
        == f"compress failed ({shown}); retrieve next"
    )


def test_after_failure_reject_drops_the_transforms_still_planned() -> None:
    engine, facts, decision = planned(300_000, history_share=0.9, compress={"on_failure": "reject"})
    assert decision.transforms == (C, R)
    after = engine.after_failure(decision, facts, reason="boom")
    assert (after.action, after.transforms) == (Action.REJECT, ())
    assert after.rejection is not None and after.rejection.status == 503


@pytest.mark.parametrize(
    ("new_tokens", "action", "transforms"),
    [(150_001, C, ()), (249_999, C, ()), (271_999, C, ()), (272_000, C, ()), (272_001, R, (R,))],
)
def test_deferred_timing_sends_a_compression_up_to_the_cliff_without_excerpting_it(
    new_tokens: int, action: Action, transforms: tuple[Action, ...]
) -> None:
    """A compacted prefix reused turn after turn is over the fresh target but under the cliff: it goes
    as it is, so the conversation never flips between a compacted and an excerpted prefix."""
    engine, facts, decision = planned(300_000, history_share=0.8)
    assert decision.transforms == (C, R)
    after = engine.after_transform(decision, facts, new_tokens)
    assert (after.action, after.transforms) == (action, transforms)
    assert after.above_cliff is False


@pytest.mark.parametrize(
    ("tokens", "step", "default"),
    [
        (300_000, R, {"retrieve": {"on_failure": "reject"}}),
        (300_000, R, {"retrieve": {"on_failure": "forward"}, "on_exhausted": "reject"}),
        (300_000, R, {"on_exhausted": "reject"}),
    ],
)
def test_after_a_lasting_failure_the_rejection_is_400_context_length_exceeded(
    tokens: int, step: Action, default: dict[str, Any]
) -> None:
    """Retrieval that finds nothing to cut fails the same way on every retry: 400, never a 503 the SDKs
    would retry."""
    engine, facts, decision = planned(tokens, **default)
    assert decision.transforms == (step,)
    after = engine.after_failure(decision, facts, reason="retrieval could not cut it", lasting=True)
    assert (after.action, after.transforms) == (Action.REJECT, ())
    assert after.rejection is not None
    assert (after.rejection.status, after.rejection.code) == (400, "context_length_exceeded")
    assert after.rejection.error_type == "invalid_request_error"
    assert "price cliff is 272000 tokens" in after.rejection.message
    assert (
        "retrieve failed (retrieval could not cut it); the request cannot be cut" in after.rejection.message
    )


def test_a_lasting_failure_still_moves_on_to_the_next_transform() -> None:
    engine, facts, decision = planned(260_000)
    after = engine.after_failure(decision, facts, reason="nothing", lasting=True)
    assert (after.action, after.transforms, after.rejection) == (R, (R,), None)


def test_an_exhausted_request_within_the_window_is_forwarded_by_default() -> None:
    """Retrieval left it over the cliff and nothing else can cut it: it goes, billed above the cliff."""
    engine, facts, decision = planned(320_504)
    after = engine.after_transform(decision, facts, 300_000)
    assert (after.action, after.transforms, after.rejection) == (R, (), None)
    assert (after.tokens, after.above_cliff) == (300_000, True)
    assert after.warnings[-1] == (
        "300000 input tokens go to gpt-5.4 above its price cliff of 272000 tokens "
        "(on_exhausted: forward, nothing left to cut): billed at the higher tier"
    )


def test_an_exhausted_request_is_rejected_when_the_policy_says_so() -> None:
    engine, facts, decision = planned(320_504, on_exhausted="reject")
    after = engine.after_transform(decision, facts, 300_000)
    assert after.rejection is not None
    assert (after.action, after.above_cliff, after.rejection.status) == (Action.REJECT, False, 400)


def test_an_exhausted_request_over_the_window_is_rejected_whatever_the_policy() -> None:
    engine, facts, decision = planned(1_100_000)
    after = engine.after_transform(decision, facts, 1_060_000)
    assert after.rejection is not None
    assert after.rejection.message.startswith("This model's maximum context length is 1050000 tokens")
    failed = engine.after_failure(decision, facts, reason="no room", lasting=True)
    assert failed.rejection is not None and failed.rejection.status == 400


@pytest.mark.parametrize("lasting", [True, False])
def test_a_request_every_transform_failed_on_is_sent_as_it_stands_within_the_window(lasting: bool) -> None:
    engine, facts, decision = planned(320_504, history_share=0.9)
    assert decision.transforms == (C, R)
    retrieving = engine.after_failure(decision, facts, reason="over the target", lasting=lasting)
    after = engine.after_failure(
        retrieving, facts, reason="retrieve made the request larger", lasting=lasting
    )
    assert (after.action, after.transforms, after.rejection) == (F, (), None)
    assert (after.tokens, after.above_cliff) == (320_504, True)
    assert after.warnings[-2] == "retrieve failed (retrieve made the request larger); sent as it stands"
    assert "on_exhausted: forward" in after.warnings[-1]


def test_an_exhausted_compression_is_sent_compressed_when_retrieval_fails_after_it() -> None:
    engine, facts, decision = planned(600_000, history_share=0.9, compress={"timing": "eager"})
    compressed = engine.after_transform(decision, facts, 290_000)
    assert compressed.transforms == (R,)
    after = engine.after_failure(compressed, facts, reason="no document", lasting=True)
    assert (after.action, after.applied, after.tokens, after.above_cliff) == (C, (C,), 290_000, True)
