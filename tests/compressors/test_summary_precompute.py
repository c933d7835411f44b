from __future__ import annotations

import pytest

from compressors.summary import CannotCompress, Precomputed, SummarizeOldTurns
from tests.compressors.test_summary_fakes import (
    CharCounter,
    DictCache,
    ScriptedCompleter,
    conversation,
    make_settings,
    tool_exchange,
)


def make() -> tuple[SummarizeOldTurns, ScriptedCompleter]:
    completer = ScriptedCompleter()
    return SummarizeOldTurns(counter=CharCounter(), completer=completer, cache=DictCache()), completer


@pytest.mark.anyio
async def test_precompute_then_the_crossing_request_finds_the_summary_cached() -> None:
    compressor, completer = make()
    after_response = [
        *conversation(5),
        {"role": "user", "content": "question 6"},
        {"role": "assistant", "content": "x"},
    ]
    done = await compressor.precompute(after_response, make_settings())
    assert done == Precomputed(summarized_blocks=10, cache_hit=False, calls_made=1)
    crossing = [*after_response, {"role": "user", "content": "question 7"}]
    result = await compressor.compress(crossing, make_settings())
    assert (result.cache_hit, result.calls_made, completer.calls) == (True, 0, 1)
    assert result.messages[2:] == crossing[11:]


@pytest.mark.anyio
async def test_precompute_twice_is_a_cache_hit() -> None:
    compressor, completer = make()
    messages = conversation(4)
    await compressor.precompute(messages, make_settings())
    again = await compressor.precompute(messages, make_settings())
    assert again == Precomputed(summarized_blocks=6, cache_hit=True, calls_made=0)
    assert completer.calls == 1


@pytest.mark.anyio
async def test_precompute_with_nothing_old_does_nothing() -> None:
    compressor, completer = make()
    assert await compressor.precompute(conversation(1), make_settings()) == Precomputed(0, False, 0)
    assert completer.calls == 0


@pytest.mark.anyio
async def test_precompute_does_not_fail_on_a_result_over_the_target_but_refuses_a_kept_part_over_it() -> None:
    compressor, completer = make()
    messages = conversation(6)
    kept = CharCounter().count_messages([messages[0], *messages[11:]])
    done = await compressor.precompute(messages, make_settings(target_tokens=kept + 1))
    assert done.calls_made == 1
    fresh, fresh_completer = make()
    floor = CharCounter().count_messages([messages[0], messages[11]])  # all summarised but these two
    with pytest.raises(CannotCompress):
        await fresh.precompute(messages, make_settings(target_tokens=floor - 1))
    assert (completer.calls, fresh_completer.calls) == (1, 0)


@pytest.mark.anyio
async def test_precompute_counts_the_blocks_covered_even_when_the_last_one_is_the_kept_user_message() -> None:
    compressor, _ = make()
    messages = [
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "now do it"},
        *tool_exchange(1),
        *tool_exchange(2),
    ]
    counter = CharCounter()
    budget = counter.count_messages(messages[3:]) - counter.count_messages([])
    done = await compressor.precompute(
        messages, make_settings(keep_recent_turns=None, keep_recent_tokens=budget)
    )
    assert done == Precomputed(summarized_blocks=3, cache_hit=False, calls_made=1)
