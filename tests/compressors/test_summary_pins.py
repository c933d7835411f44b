"""Pins: the first user message and the user's instructions (their own words beside a paste) stay
verbatim in the summary."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import pytest

from compressors.protocols import Message
from compressors.summary import SummarizeOldTurns
from compressors.summary.pins import HEADING, NO_PINS, pin, typed
from tests.compressors.test_summary_fakes import (
    CharCounter,
    DictCache,
    ScriptedCompleter,
    good_summary,
    make_settings,
    summary_messages,
)
from tests.fixtures.haystack import ProseGenerator, TiktokenCounter, o200k_encoding

COUNTER = CharCounter()
GOAL = "Build a CSV parser in Rust. Requirements: no unsafe code, streaming input."
PASTE = "pasted log line\n" * 80


def chat(first: str = GOAL, *, paste: str = PASTE) -> list[Message]:
    said = [first, "use tabs, not spaces", paste, "also support quoted fields"]
    messages: list[Message] = [{"role": "system", "content": "You are helpful."}]
    for n, text in enumerate(said, start=1):
        messages += [{"role": "user", "content": text}, {"role": "assistant", "content": f"answer {n}"}]
    return [*messages, {"role": "user", "content": "what is left to do?"}]


def make(completer: ScriptedCompleter | None = None) -> tuple[SummarizeOldTurns, ScriptedCompleter]:
    completer = completer or ScriptedCompleter()
    return SummarizeOldTurns(counter=COUNTER, completer=completer, cache=DictCache()), completer


def pinning(**overrides: Any) -> Any:
    return make_settings(**{"pinned_tokens": 8_000, "pin_max_tokens": 200, **overrides})


def quoted(*pairs: tuple[int, str]) -> str:
    return f"{HEADING}\n\n" + "\n\n".join(f"[message {n}]\n{text}" for n, text in pairs)


@pytest.mark.anyio
async def test_pins_quote_the_first_message_and_short_instructions_but_not_a_paste() -> None:
    compressor, _ = make()
    result = await compressor.compress(chat(), pinning())
    summary = summary_messages(result.messages)[0]
    pins = quoted((2, GOAL), (4, "use tabs, not spaces"), (8, "also support quoted fields"))
    assert summary.endswith(f"\n\n{pins}\n\n{good_summary('summary 1')}")
    assert "pasted log line" not in summary
    assert result.pinned == 3
    assert result.tokens_after == COUNTER.count_messages(result.messages)


@pytest.mark.anyio
async def test_pins_quote_a_long_first_message_as_a_marked_head_and_tail() -> None:
    goal = "G" * 600 + "M" * 300 + "T" * 100
    compressor, _ = make()
    result = await compressor.compress(chat(goal), pinning())
    excerpt = "G" * 133 + "\n[\u2026 800 tokens of this message left out by the gateway \u2026]\n" + "T" * 67
    assert f"[message 2]\n{excerpt}\n\n[message 4]" in summary_messages(result.messages)[0]


@pytest.mark.anyio
async def test_pins_keep_the_first_message_then_the_most_recent_within_the_budget() -> None:
    compressor, _ = make()
    budget = len(GOAL) + len("also support quoted fields") + 5
    result = await compressor.compress(chat(), pinning(pinned_tokens=budget))
    summary = summary_messages(result.messages)[0]
    assert quoted((2, GOAL), (8, "also support quoted fields")) in summary
    assert "use tabs" not in summary.split("## User goal")[0]
    assert result.pinned == 2


@pytest.mark.anyio
async def test_pins_are_off_with_a_zero_budget() -> None:
    compressor, _ = make()
    result = await compressor.compress(chat(), make_settings(pinned_tokens=0))
    assert HEADING not in summary_messages(result.messages)[0] and result.pinned == 0


@pytest.mark.parametrize(
    ("message", "is_typed"),
    [
        ({"role": "user", "content": "do it"}, True),
        ({"role": "user", "content": [{"type": "text", "text": "look"}, {"type": "image_url"}]}, True),
        ({"role": "user", "content": [{"type": "tool_result", "content": "42"}]}, False),
        ({"role": "user", "content": ["bare"]}, False),
        ({"role": "user", "content": None}, False),
        ({"role": "user", "content": "   "}, False),
        ({"role": "user", "content": "[Summary of the earlier conversation (message 2) ..."}, False),
        ({"role": "user", "content": "[Excerpts recalled by the gateway from ..."}, False),
        ({"role": "assistant", "content": "do it"}, False),
    ],
)
def test_typed_tells_the_users_own_words_from_tool_results_and_gateway_messages(
    message: Message, is_typed: bool
) -> None:
    assert typed(message) is is_typed


def test_pin_skips_an_empty_first_message_and_a_spent_budget() -> None:
    messages: list[Message] = [
        {"role": "user", "content": [{"type": "image_url"}]},
        {"role": "user", "content": "short"},
    ]
    settings = pinning()
    found = pin(messages, [0, 1], budget=100, settings=settings, counter=COUNTER)
    assert (found.count, found.text) == (2, quoted((1, "[image]"), (2, "short")))
    messages[0] = {"role": "user", "content": ""}
    assert pin(messages, [0, 1], budget=100, settings=settings, counter=COUNTER).count == 1
    assert pin(messages, [0, 1], budget=0, settings=settings, counter=COUNTER) == NO_PINS
    assert pin(messages, [1], budget=3, settings=settings, counter=COUNTER) == NO_PINS


def grow(messages: Sequence[Message], said: str) -> list[Message]:
    return [
        *messages,
        {"role": "assistant", "content": "noted " + "n" * 300},
        {"role": "user", "content": said},
    ]


@pytest.mark.anyio
async def test_pins_are_fixed_with_their_part_and_an_appended_part_pins_its_own_span() -> None:
    compressor, _ = make()
    turn1 = chat()
    first = await compressor.compress(turn1, pinning())
    turn2 = grow(grow(turn1, "switch to semicolons"), "and add a header row")
    tight = pinning(target_tokens=first.tokens_after + 400)
    second = await compressor.compress(turn2, tight)
    assert second.parts == 2 and summary_messages(second.messages)[0] == summary_messages(first.messages)[0]
    part2 = summary_messages(second.messages)[1]
    assert quoted((10, "what is left to do?"), (12, "switch to semicolons")) in part2
    assert GOAL not in part2 and second.pinned == 5
    spent = pinning(pinned_tokens=len(GOAL) + 46, target_tokens=first.tokens_after + 400)
    fresh, _ = make()
    await fresh.compress(turn1, spent)
    third = await fresh.compress(turn2, spent)
    assert third.parts == 2 and HEADING not in summary_messages(third.messages)[1]


@pytest.mark.anyio
async def test_a_roll_up_pins_the_whole_span_again() -> None:
    def wordy(number: int, prompt: Sequence[Message]) -> str:
        return good_summary(f"summary {number} " + "w" * 800)

    compressor, completer = make(ScriptedCompleter(default=wordy))
    turn1 = chat()
    first = await compressor.compress(turn1, pinning())
    turn2 = grow(grow(turn1, "switch to semicolons"), "and add a header row")
    second = await compressor.compress(turn2, pinning(target_tokens=first.tokens_after + 600))
    assert (second.parts, completer.calls) == (1, 3)
    pins = quoted(
        (2, GOAL),
        (4, "use tabs, not spaces"),
        (8, "also support quoted fields"),
        (10, "what is left to do?"),
        (12, "switch to semicolons"),
    )
    assert pins in summary_messages(second.messages)[0] and second.pinned == 5


def log_lines(count: int) -> str:
    return "\n".join(
        f"2024-05-01T12:00:{n % 60:02d}Z INFO request {n} took {n * 7 % 900}ms" for n in range(count)
    )


@pytest.mark.anyio
async def test_pins_keep_the_users_words_beside_a_paste_and_leave_the_paste_out() -> None:
    before = "Also: all timestamps are UTC ISO 8601. Here is the next log:"
    after = "Flag every request slower than 500ms."
    paste = f"{before}\n{log_lines(40)}\n{after}"
    compressor, _ = make()
    result = await compressor.compress(chat(paste=paste), pinning())
    summary = summary_messages(result.messages)[0]
    left_out = f"[\u2026 {len(log_lines(40)):,} tokens of pasted material left out by the gateway \u2026]"
    pins = quoted(
        (2, GOAL),
        (4, "use tabs, not spaces"),
        (6, f"{before}\n{left_out}\n{after}"),
        (8, "also support quoted fields"),
    )
    assert summary.endswith(f"\n\n{pins}\n\n{good_summary('summary 1')}")
    assert result.pinned == 4 and "request 7 took" not in summary.split("## User goal")[0]


@pytest.mark.anyio
async def test_pins_quote_the_own_words_of_a_long_first_message_rather_than_its_head_and_tail() -> None:
    goal = "Parse these rows into a report grouped by hour:\n" + log_lines(60) + "\nUse UTC everywhere."
    compressor, _ = make()
    result = await compressor.compress(chat(goal), pinning())
    left_out = f"[\u2026 {len(log_lines(60)):,} tokens of pasted material left out by the gateway \u2026]"
    expected = (
        f"[message 2]\nParse these rows into a report grouped by hour:\n{left_out}\nUse UTC everywhere."
    )
    assert f"{expected}\n\n[message 4]" in summary_messages(result.messages)[0]


@pytest.mark.anyio
async def test_a_paste_with_no_words_of_the_user_is_not_pinned_and_the_budget_still_holds() -> None:
    compressor, _ = make()
    result = await compressor.compress(chat(paste=log_lines(40)), pinning())
    summary = summary_messages(result.messages)[0]
    assert "[message 6]" not in summary and result.pinned == 3
    said = [f"Rule {n}: keep the {n}th column.\n{log_lines(30)}" for n in range(8)]
    messages: list[Message] = []
    for text in said:
        messages += [{"role": "user", "content": text}, {"role": "assistant", "content": "ok"}]
    messages.append({"role": "user", "content": "go"})
    budget = 200
    found = pin(messages, list(range(len(messages) - 1)), budget=budget, settings=pinning(), counter=COUNTER)
    assert found.tokens <= budget and found.count == 2
    assert "Rule 7: keep the 7th column." in found.text and "Rule 0:" in found.text  # the first, the latest


def session_paste(rng: random.Random, prose: ProseGenerator) -> str:
    """A paste of one of the shapes users paste: a log, fenced code, JSON, CSV, a quoted mail, a trace."""
    shape = rng.randrange(6)
    if shape == 0:
        return "\n".join(
            f"2024-05-0{rng.randint(1, 9)}T{rng.randint(0, 23):02d}:00:00Z WARN [svc-{rng.randint(1, 9)}] "
            f"slow call id={rng.getrandbits(32):x} {rng.randint(1, 999)}ms"
            for _ in range(rng.randint(30, 120))
        )
    if shape == 1:
        body = [f"def handler_{n}(event):\n    return {{'n': {n}}}" for n in range(rng.randint(10, 40))]
        return "```python\n" + "\n".join(body) + "\n```"
    if shape == 2:
        return "\n".join(
            f'{{"id": {n}, "total": {rng.random() * 100:.2f}}},' for n in range(rng.randint(30, 100))
        )
    if shape == 3:
        return "\n".join(f"{n},{rng.randint(1, 99)},{rng.random():.4f}" for n in range(rng.randint(50, 200)))
    if shape == 4:
        return "\n".join("> " + prose.sentence() for _ in range(rng.randint(15, 50)))
    frames = [
        f'  File "/srv/m{n}.py", line {n}, in run_{n}\n    step_{n}(payload)'
        for n in range(rng.randint(8, 30))
    ]
    return "Traceback (most recent call last):\n" + "\n".join(frames) + "\nKeyError: 'tenant'"


@pytest.mark.anyio
async def test_every_instruction_beside_a_paste_stays_verbatim_in_every_compacted_request() -> None:
    """A long chat where every third message gives an instruction with a paste (before it, after it, glued
    to it, or two instructions around two pastes) and the others short instructions: compacted turn
    after turn past a line, every instruction given so far is in every compacted request, verbatim."""
    counter = TiktokenCounter(o200k_encoding())
    rng, prose = random.Random(11), ProseGenerator(12)
    settings = make_settings(
        target_tokens=20_000,
        reuse_tokens=68_000,
        keep_recent_turns=2,
        keep_recent_tokens=4_000,
        keep_recent_max_tokens=15_000,
        pinned_tokens=4_000,
        pin_max_tokens=500,
        recall_tokens=1_000,
    )
    compressor = SummarizeOldTurns(counter=counter, completer=ScriptedCompleter(), cache=DictCache())
    planted: list[str] = []

    def rule() -> str:
        planted.append(f"Rule {len(planted)}: {prose.sentence()}")
        return planted[-1]

    messages: list[Message] = [{"role": "system", "content": "You are a careful analyst."}]
    compacted = 0
    for turn in range(60):
        shape = turn // 3 % 4
        if turn % 3:
            text = f"{rule()} {prose.sentence()}"
        elif shape == 0:
            text = f"{rule()} Here it is:\n{session_paste(rng, prose)}"
        elif shape == 1:
            text = f"{session_paste(rng, prose)}\n{rule()}"
        elif shape == 2:
            text = f"{rule()} Data: {session_paste(rng, prose)}"
        else:
            text = f"{rule()}\n{session_paste(rng, prose)}\n{rule()}\n{session_paste(rng, prose)}"
        messages.append({"role": "user", "content": text})
        if counter.count_messages(messages) > 30_000:
            result = await compressor.compress(messages, settings)
            assert result.summarized_count
            sent = "\n".join(str(m["content"]) for m in result.messages)
            assert [said for said in planted if said not in sent] == []
            compacted += 1
        messages.append({"role": "assistant", "content": " ".join(prose.sentence() for _ in range(20))})
    assert compacted >= 20 and len(planted) >= 60


def test_excerpts_of_long_prose_take_only_what_the_instructions_leave() -> None:
    prose = ProseGenerator(13)
    essays = [
        f"Essay {n} follows.\n" + "\n".join(" ".join(prose.sentence() for _ in range(3)) for _ in range(20))
        for n in range(6)
    ]
    said = ["Answer in metric units.", "Never name the vendor.", "The deadline is March 14."]
    messages: list[Message] = [{"role": "user", "content": "Help me review these essays."}]
    for number, text in enumerate([said[0], essays[0], said[1], *essays[1:4], said[2], *essays[4:]]):
        messages += [{"role": "user", "content": text}, {"role": "assistant", "content": f"ok {number}"}]
    messages.append({"role": "user", "content": "go"})
    span = list(range(len(messages) - 1))
    budget = 400
    found = pin(messages, span, budget=budget, settings=pinning(pin_max_tokens=400), counter=COUNTER)
    assert all(f"\n{instruction}" in found.text for instruction in said)  # older than most essays
    assert "Essay 5 follows." in found.text  # the latest essay's opening, with what was left
    assert "Essay 0 follows." not in found.text and found.tokens <= budget
