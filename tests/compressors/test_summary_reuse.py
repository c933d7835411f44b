"""A stable compacted prefix: reuse up to ``reuse_tokens`` byte for byte, append parts, roll them up."""

from __future__ import annotations

from collections.abc import Sequence

import orjson
import pytest

from compressors.protocols import Message
from compressors.summary import CannotCompress, SummarizeOldTurns
from compressors.summary.compaction import lay_out
from compressors.summary.keys import prefix_hashes, summary_key
from compressors.summary.selection import select
from compressors.summary.store import CachedSummary, Part, SummaryStore
from tests.compressors.test_summary_fakes import (
    CharCounter,
    DictCache,
    ScriptedCompleter,
    conversation,
    good_summary,
    make_settings,
    summary_messages,
    tool_loop,
)

COUNTER = CharCounter()


def make(
    completer: ScriptedCompleter | None = None,
) -> tuple[SummarizeOldTurns, ScriptedCompleter, DictCache]:
    completer = completer or ScriptedCompleter()
    cache = DictCache()
    return SummarizeOldTurns(counter=COUNTER, completer=completer, cache=cache), completer, cache


def grow(messages: Sequence[Message], n: int) -> list[Message]:
    """``messages`` (ending in a user message) plus an answer and the next question."""
    return [
        *messages,
        {"role": "assistant", "content": f"answer {n} " + "a" * 300},
        {"role": "user", "content": f"question {n + 1}"},
    ]


def same_bytes(longer: Sequence[Message], shorter: Sequence[Message]) -> bool:
    return orjson.dumps(list(longer[: len(shorter)])) == orjson.dumps(list(shorter))


TURN1 = [*conversation(6), {"role": "user", "content": "question 7"}]


@pytest.mark.anyio
async def test_reuse_sends_the_same_bytes_over_three_growing_turns_without_a_cheap_call() -> None:
    compressor, completer, _ = make()
    first = await compressor.compress(TURN1, make_settings())
    settings = make_settings(target_tokens=first.tokens_after + 200, reuse_tokens=10**6)
    previous, turn = first, TURN1
    for n in range(7, 10):
        turn = grow(turn, n)
        result = await compressor.compress(turn, settings)
        assert (result.reused, result.cache_hit, result.calls_made, completer.calls) == (True, True, 0, 1)
        assert same_bytes(result.messages, previous.messages)
        assert result.messages[2:] == turn[13:] and result.parts == 1
        previous = result
    assert previous.tokens_after > settings.target_tokens


@pytest.mark.anyio
async def test_past_the_reuse_limit_a_part_is_appended_and_the_first_stays_byte_identical() -> None:
    compressor, completer, _ = make()
    first = await compressor.compress(TURN1, make_settings())
    settings = make_settings(target_tokens=first.tokens_after + 400, reuse_tokens=first.tokens_after + 500)
    turn2 = grow(TURN1, 7)
    second = await compressor.compress(turn2, settings)
    assert second.reused and completer.calls == 1
    turn3 = grow(turn2, 8)
    third = await compressor.compress(turn3, settings)
    assert (third.reused, third.cache_hit, third.calls_made, completer.calls) == (False, False, 1, 2)
    assert same_bytes(third.messages, first.messages[:2])
    parts = summary_messages(third.messages)
    assert parts[0] == first.messages[1]["content"]
    assert parts[1].startswith(
        "[Summary of the earlier conversation (messages 14\u201317, continued: part 2)"
    )
    assert third.messages[3:] == turn3[17:] and (third.parts, third.summarized) == (2, range(1, 17))
    material = completer.material(1)
    assert "summary 1" in material and "[14] user: question 7" in material
    assert "[17] assistant: answer 8" in material and "[2] user" not in material
    turn4 = [*turn3, {"role": "assistant", "content": "ok"}, {"role": "user", "content": "q10"}]
    fourth = await compressor.compress(turn4, settings)
    assert (fourth.reused, completer.calls) == (True, 2)
    assert same_bytes(fourth.messages, third.messages)


def wordy(number: int, prompt: Sequence[Message]) -> str:
    return good_summary(f"summary {number} " + "w" * 800)


@pytest.mark.anyio
@pytest.mark.parametrize(("parts_max", "parts", "calls"), [(None, 1, 3), (5_000, 2, 2)])
async def test_parts_are_rolled_up_into_one_only_past_summary_parts_max_tokens(
    parts_max: int | None, parts: int, calls: int
) -> None:
    compressor, completer, _ = make(ScriptedCompleter(default=wordy))
    first = await compressor.compress(TURN1, make_settings())
    settings = make_settings(summary_parts_max_tokens=parts_max, target_tokens=first.tokens_after + 1_200)
    turn = TURN1
    for n in range(7, 11):
        turn = grow(turn, n)
    result = await compressor.compress(turn, settings)
    assert (result.parts, completer.calls, result.calls_made) == (parts, calls, calls - 1)
    if parts == 1:
        merge = completer.material(2)
        assert '<summary part="1">\n## User goal\nsummary 1' in merge
        assert '<summary part="2">\n## User goal\nsummary 2' in merge
        summary = summary_messages(result.messages)[0]
        assert summary.startswith("[Summary of the earlier conversation (messages 2\u201321), made by")
        assert "summary 3 " in summary
    assert result.messages[-1] == {"role": "user", "content": "question 11"}


@pytest.mark.anyio
async def test_a_summary_cached_in_the_earlier_format_reads_as_one_part() -> None:
    compressor, completer, cache = make()
    settings = make_settings()
    selection = select(TURN1, settings=settings, counter=COUNTER)
    hashes = prefix_hashes(TURN1, selection.blocks[: selection.split], settings=settings)
    value = {"blocks": selection.split, "text": good_summary("old format")}
    await cache.set(summary_key(hashes[selection.split]), orjson.dumps(value), ttl_seconds=60)
    result = await compressor.compress(TURN1, settings)
    assert (result.reused, result.parts, completer.calls) == (True, 1, 0)
    assert summary_messages(result.messages)[0].endswith(good_summary("old format"))


@pytest.mark.anyio
async def test_a_task_kept_in_place_stays_there_when_the_user_writes_again() -> None:
    compressor, completer, _ = make()
    loop = tool_loop([f"output {n} " + "o" * 400 for n in range(6)])
    recent = COUNTER.count_messages(loop[-4:]) - COUNTER.count_messages([])
    settings = make_settings(keep_recent_turns=0, keep_recent_tokens=recent, reuse_tokens=10**6)
    first = await compressor.compress(loop, settings)
    assert first.messages[1] is loop[1] and "(messages 3\u201310)" in first.messages[2]["content"]
    after = [*loop, {"role": "assistant", "content": "fixed"}, {"role": "user", "content": "now deploy"}]
    second = await compressor.compress(after, settings)
    assert (second.reused, completer.calls) == (True, 1)
    assert same_bytes(second.messages, first.messages) and second.messages[1] is loop[1]
    tight = make_settings(
        keep_recent_turns=0, keep_recent_tokens=recent, target_tokens=second.tokens_after - 10
    )
    third = await compressor.compress(after, tight)
    assert (third.reused, third.parts, completer.calls) == (False, 2, 2)
    assert same_bytes(third.messages, first.messages[:3])


@pytest.mark.anyio
async def test_precompute_leaves_a_reusable_compaction_alone_and_appends_past_the_limit() -> None:
    compressor, completer, _ = make()
    first = await compressor.compress(TURN1, make_settings())
    after_response = [*grow(TURN1, 7), {"role": "assistant", "content": "answer 8"}]
    roomy = make_settings(reuse_tokens=10**6)
    done = await compressor.precompute(after_response, roomy)
    assert (done.summarized_blocks, done.cache_hit, done.calls_made, completer.calls) == (12, True, 0, 1)
    tight = make_settings(target_tokens=first.tokens_after)
    done = await compressor.precompute(after_response, tight)
    assert (done.summarized_blocks, done.cache_hit, done.calls_made) == (14, False, 1)
    crossing = [*after_response, {"role": "user", "content": "question 9"}]
    result = await compressor.compress(crossing, make_settings(reuse_tokens=10**6))
    assert (result.reused, result.parts, completer.calls) == (True, 2, 2)


@pytest.mark.anyio
async def test_a_reused_compaction_over_the_reuse_limit_with_nothing_newer_raises() -> None:
    compressor, completer, _ = make()
    first = await compressor.compress(TURN1, make_settings())
    limit = first.tokens_after - 1
    with pytest.raises(CannotCompress, match=f"over the reuse limit of {limit}") as caught:
        await compressor.compress(TURN1, make_settings(target_tokens=limit, reuse_tokens=limit))
    assert (caught.value.target_tokens, caught.value.calls_made, completer.calls) == (limit, 0, 1)
    assert caught.value.kept_tokens == COUNTER.count_messages([TURN1[0], TURN1[-1]])


@pytest.mark.anyio
async def test_a_cached_compaction_that_would_replace_nothing_is_written_anew() -> None:
    compressor, completer, cache = make()
    loop = tool_loop([f"output {n} " + "o" * 400 for n in range(6)])
    recent = COUNTER.count_messages(loop[-4:]) - COUNTER.count_messages([])
    settings = make_settings(keep_recent_turns=0, keep_recent_tokens=recent)
    selection = select(loop, settings=settings, counter=COUNTER)
    hashes = prefix_hashes(loop, selection.blocks[: selection.split], settings=settings)
    await SummaryStore(cache, ttl_seconds=60).save(hashes, CachedSummary.single(1, "only the task"))
    result = await compressor.compress(loop, settings)
    assert (result.reused, result.parts, completer.calls) == (False, 1, 1)
    assert "only the task" not in str(result.messages)


def test_a_part_whose_span_is_all_kept_gets_no_message() -> None:
    loop = tool_loop([f"output {n}" for n in range(4)])
    settings = make_settings(keep_recent_turns=0, keep_recent_tokens=0)
    selection = select(loop, settings=settings, counter=COUNTER)
    summary = CachedSummary(blocks=3, parts=(Part(1, "task only", kept=(0,)), Part(3, "calls")))
    view = lay_out(loop, selection, summary, settings=settings, counter=COUNTER)
    assert [section.replaced for section in view.sections] == [[2, 3, 4, 5]]
    assert "continued: part 2" in view.messages[2]["content"]


@pytest.mark.anyio
async def test_no_part_is_appended_for_newer_blocks_that_hold_only_the_last_user_message() -> None:
    compressor, completer, _ = make()
    settings = make_settings(keep_recent_turns=0, keep_recent_tokens=0)
    turn1 = conversation(2)[:-1]
    first = await compressor.compress(turn1, settings)
    assert first.messages[2] is turn1[3]  # the last user message, kept in place inside the span
    turn2 = [*turn1, {"role": "user", "content": "and now?"}]
    limit = first.tokens_after
    with pytest.raises(CannotCompress, match="reuse limit") as caught:
        await compressor.compress(
            turn2, make_settings(keep_recent_turns=0, keep_recent_tokens=0, target_tokens=limit)
        )
    assert (caught.value.calls_made, completer.calls) == (0, 1)
