from __future__ import annotations

from typing import Any

import pytest

from compressors.protocols import Message
from compressors.summary import CannotCompress, SummarizeOldTurns, SummaryFailed, SummarySettings
from compressors.summary.prompt import STRICT
from tests.compressors.test_summary_fakes import (
    CharCounter,
    DictCache,
    ScriptedCompleter,
    assert_tool_pairs_intact,
    conversation,
    good_summary,
    make_settings,
    tool_exchange,
)

COUNTER = CharCounter()


def make(
    completer: ScriptedCompleter | None = None,
) -> tuple[SummarizeOldTurns, ScriptedCompleter, DictCache]:
    completer = completer or ScriptedCompleter()
    cache = DictCache()
    return SummarizeOldTurns(counter=COUNTER, completer=completer, cache=cache), completer, cache


def summary_of(result_messages: list[Message]) -> str:
    found = [m["content"] for m in result_messages if str(m.get("content", "")).startswith("[Summary of")]
    assert len(found) == 1
    return str(found[0])


@pytest.mark.anyio
async def test_compress_replaces_old_turns_with_one_summary_and_keeps_the_rest_verbatim() -> None:
    compressor, completer, _ = make()
    messages = conversation(4)
    result = await compressor.compress(messages, make_settings())
    assert result.messages[0] is messages[0]
    assert result.messages[2:] == messages[7:] and result.messages[2] is messages[7]
    summary = result.messages[1]
    assert summary["role"] == "user"
    assert summary["content"].startswith(
        "[Summary of the earlier conversation (messages 2\u20137), made by the gateway."
    )
    assert summary["content"].endswith(good_summary("summary 1"))
    assert (result.summarized, result.summarized_count) == (range(1, 7), 6)
    assert (result.calls_made, result.cache_hit) == (1, False)
    assert result.tokens_before == COUNTER.count_messages(messages)
    assert result.tokens_after == COUNTER.count_messages(result.messages) < result.tokens_before
    material = completer.material(0)
    assert "[2] user: question 1" in material and "[7] assistant: answer 3" in material
    assert "question 4" not in material and "You are helpful" not in material
    assert completer.max_tokens == [500]


@pytest.mark.anyio
async def test_compress_uses_the_token_count_the_gateway_already_has() -> None:
    compressor, _, _ = make()
    result = await compressor.compress(conversation(3), make_settings(), tokens_before=123_456)
    assert result.tokens_before == 123_456


@pytest.mark.anyio
async def test_compress_keeps_system_messages_in_the_middle_in_place_after_the_summary() -> None:
    compressor, completer, _ = make()
    base = conversation(4)
    messages = [
        *base[:3],
        {"role": "system", "content": "mid rule"},
        *base[3:7],
        {"role": "developer", "content": "late"},
    ]
    messages += base[7:]
    result = await compressor.compress(messages, make_settings())
    assert [m["content"] for m in result.messages[2:4]] == ["mid rule", "late"]
    assert result.messages[0] is messages[0] and result.messages[4:] == base[7:]
    assert "messages 2\u20138" in summary_of(result.messages)
    assert result.summarized_count == 6
    assert "mid rule" not in completer.material(0) and "late" not in completer.material(0)


@pytest.mark.anyio
async def test_compress_describes_old_images_and_keeps_recent_ones() -> None:
    compressor, completer, _ = make()
    old_image: Message = {
        "role": "user",
        "content": [
            {"type": "text", "text": "what is in this chart?"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,OLDPIXELS"}},
        ],
    }
    new_image: Message = {
        "role": "user",
        "content": [
            {"type": "image_url", "image_url": {"url": "https://example.test/new.png", "detail": "high"}}
        ],
    }
    messages = [old_image, {"role": "assistant", "content": "a bar chart"}, new_image]
    result = await compressor.compress(messages, make_settings())
    assert result.messages[-1] is new_image
    assert "[1] user: what is in this chart?\n[image]" in completer.material(0)
    assert "OLDPIXELS" not in completer.material(0)
    assert "OLDPIXELS" not in str(result.messages)


TOOL_CONVERSATION: list[Message] = [
    {"role": "system", "content": "agent"},
    {"role": "user", "content": "fix the build"},
    *tool_exchange(1, calls=2),
    {"role": "assistant", "content": "found it"},
    {"role": "user", "content": "go on"},
    *tool_exchange(2),
    *tool_exchange(3, calls=3),
    {"role": "assistant", "content": "patched"},
    {"role": "user", "content": "run the tests"},
    *tool_exchange(4),
]


@pytest.mark.anyio
@pytest.mark.parametrize("recent", range(1, len(TOOL_CONVERSATION)))
async def test_compress_never_separates_a_tool_pair_wherever_the_split_falls(recent: int) -> None:
    compressor, _, _ = make()
    messages = TOOL_CONVERSATION
    budget = COUNTER.count_messages(messages[-recent:]) - COUNTER.count_messages([])
    settings = make_settings(keep_recent_turns=None, keep_recent_tokens=budget)
    result = await compressor.compress(messages, settings)
    assert_tool_pairs_intact(result.messages)
    starts = [i for i, m in enumerate(messages) if m["role"] not in ("system", "tool")]
    start = min(i for i in [*starts, len(messages)] if i >= len(messages) - recent)
    start = min(start, starts[-1])  # the newest step (the last call with its answer) always stays
    last_user = max(i for i, m in enumerate(messages) if m["role"] == "user")
    summarized = [i for i in range(1, start) if i != last_user]
    if not summarized:
        assert result.messages == messages and result.calls_made == 0
        return
    pinned = [messages[last_user]] if last_user < start else []
    assert result.messages[0] is messages[0]
    assert result.messages[2:] == [*pinned, *messages[start:]]
    assert result.summarized == range(summarized[0], summarized[-1] + 1)


@pytest.mark.anyio
async def test_compress_keeps_the_last_user_message_verbatim_when_it_falls_in_the_old_part() -> None:
    compressor, completer, _ = make()
    messages: list[Message] = [
        {"role": "system", "content": "agent"},
        {"role": "user", "content": "do the task"},
    ]
    for n in range(1, 6):
        messages += tool_exchange(n)
    budget = COUNTER.count_messages(messages[-4:]) - COUNTER.count_messages([])
    result = await compressor.compress(
        messages, make_settings(keep_recent_turns=None, keep_recent_tokens=budget)
    )
    assert result.messages[1] is messages[1]
    assert "(messages 3\u20138)" in summary_of([result.messages[2]])
    assert result.messages[3:] == messages[8:]
    assert "[2] user: do the task" in completer.material(0)


@pytest.mark.anyio
async def test_compress_retries_once_with_a_stricter_prompt_after_a_malformed_summary() -> None:
    compressor, completer, _ = make(
        ScriptedCompleter(script=["Here is a summary: all good.", good_summary("second")])
    )
    result = await compressor.compress(conversation(3), make_settings())
    assert result.calls_made == 2
    assert summary_of(result.messages).endswith(good_summary("second"))
    assert not completer.prompts[0][0]["content"].endswith(STRICT)
    assert completer.prompts[1][0]["content"].endswith(STRICT)


@pytest.mark.anyio
async def test_compress_raises_summary_failed_after_two_malformed_summaries_and_caches_nothing() -> None:
    compressor, completer, cache = make(ScriptedCompleter(script=["## User goal\nx", "still wrong"]))
    with pytest.raises(SummaryFailed, match="Confirmed conclusions, Open todos") as caught:
        await compressor.compress(conversation(3), make_settings())
    assert caught.value.calls_made == 2 == completer.calls
    assert cache.keys("summary:") == [] and cache.locks == {}


@pytest.mark.anyio
async def test_compress_raises_summary_failed_chained_to_the_completer_error() -> None:
    error = RuntimeError("upstream 503")
    compressor, completer, cache = make(ScriptedCompleter(script=[error]))
    with pytest.raises(SummaryFailed, match="upstream 503") as caught:
        await compressor.compress(conversation(3), make_settings())
    assert caught.value.__cause__ is error
    assert caught.value.calls_made == 1
    assert cache.keys("summary:") == [] and cache.locks == {}
    again = await compressor.compress(conversation(3), make_settings())
    assert again.calls_made == 1 and completer.calls == 2


@pytest.mark.anyio
async def test_compress_reuses_the_cached_summary_on_the_next_turn_without_a_call() -> None:
    compressor, completer, _ = make()
    turn1 = [*conversation(4), {"role": "user", "content": "question 5"}]
    first = await compressor.compress(turn1, make_settings())
    turn2 = [*turn1, {"role": "assistant", "content": "answer 5"}, {"role": "user", "content": "question 6"}]
    second = await compressor.compress(turn2, make_settings())
    assert completer.calls == 1
    assert (second.calls_made, second.cache_hit) == (0, True)
    assert second.messages[:2] == first.messages[:2]
    assert second.messages[2:] == turn2[9:]
    assert second.summarized == first.summarized == range(1, 9)
    same = await compressor.compress(turn1, make_settings())
    assert (same.messages, same.cache_hit, completer.calls) == (first.messages, True, 1)


def summaries_of(result_messages: list[Message]) -> list[str]:
    return [str(m["content"]) for m in result_messages if str(m.get("content", "")).startswith("[Summary of")]


@pytest.mark.anyio
async def test_compress_appends_a_part_for_the_newer_blocks_when_reuse_would_pass_the_limit() -> None:
    compressor, completer, _ = make()
    turn1 = [*conversation(4), {"role": "user", "content": "question 5"}]
    first = await compressor.compress(turn1, make_settings())
    turn2 = [
        *turn1,
        {"role": "assistant", "content": "answer 5 " + "x" * 400},
        {"role": "user", "content": "q6"},
    ]
    reused = COUNTER.count_messages(
        [turn2[0], {"role": "user", "content": "[Summary" + "s" * 200}, *turn2[9:]]
    )
    tight = make_settings(target_tokens=reused - 100)
    second = await compressor.compress(turn2, tight)
    assert (second.calls_made, second.cache_hit, second.reused, completer.calls) == (1, False, False, 2)
    material = completer.material(1)
    assert "summary 1" in material and "for context only" in material
    assert "[10] user: question 5" in material and "[11] assistant: answer 5" in material
    assert "question 1" not in material and "q6" not in material
    assert second.messages[1] == first.messages[1]
    part2 = summaries_of(second.messages)[1]
    assert part2.startswith("[Summary of the earlier conversation (messages 10\u201311, continued: part 2)")
    assert part2.endswith(good_summary("summary 2"))
    assert second.messages[3:] == turn2[11:] and second.summarized == range(1, 11)
    assert (second.parts, second.summarized_count) == (2, 10)
    turn3 = [*turn2, {"role": "assistant", "content": "a6"}, {"role": "user", "content": "q7"}]
    third = await compressor.compress(turn3, tight)
    assert (third.cache_hit, third.reused, completer.calls) == (True, True, 2)
    assert third.messages[:3] == second.messages[:3]


@pytest.mark.anyio
async def test_compress_makes_a_new_summary_when_the_cheap_model_changes() -> None:
    compressor, completer, _ = make()
    await compressor.compress(conversation(3), make_settings())
    other = await compressor.compress(conversation(3), make_settings(cheap_model="cheap-2"))
    assert (other.cache_hit, completer.calls) == (False, 2)


@pytest.mark.anyio
async def test_compress_summarises_the_floor_turns_when_they_alone_are_over_the_target() -> None:
    """The last turn alone is over the target: it is summarised too, all but the last user message."""
    compressor, completer, _ = make()
    messages = conversation(3, width=400)
    kept = COUNTER.count_messages([messages[0], *messages[5:]])
    result = await compressor.compress(messages, make_settings(target_tokens=kept - 1))
    assert result.summarized == range(1, 7) and result.summarized_count == 5
    assert messages[5] in result.messages and messages[6] not in result.messages
    assert result.tokens_after <= kept - 1 and completer.calls == 1


@pytest.mark.anyio
async def test_compress_raises_cannot_compress_when_the_kept_part_is_over_the_target() -> None:
    """Even with every turn summarised, the system messages and the last user message are over it."""
    compressor, completer, _ = make()
    messages = conversation(3)
    kept = COUNTER.count_messages([messages[0], messages[5]])
    with pytest.raises(CannotCompress, match=f"has {kept} tokens") as caught:
        await compressor.compress(messages, make_settings(target_tokens=kept - 1))
    assert (caught.value.kept_tokens, caught.value.target_tokens, caught.value.calls_made) == (
        kept,
        kept - 1,
        0,
    )
    assert completer.calls == 0


@pytest.mark.anyio
async def test_compress_raises_cannot_compress_when_summary_and_kept_part_exceed_the_target() -> None:
    long_summary = good_summary("z" * 3000)
    compressor, completer, _ = make(ScriptedCompleter(default=lambda n, p: long_summary))
    messages = conversation(8)
    kept = COUNTER.count_messages([messages[0], *messages[15:]])
    settings = make_settings(target_tokens=kept + 100)
    with pytest.raises(CannotCompress, match="summarised request") as caught:
        await compressor.compress(messages, settings)
    assert (caught.value.kept_tokens, caught.value.calls_made) == (kept, 1)
    with pytest.raises(CannotCompress) as again:
        await compressor.compress(messages, settings)
    assert again.value.calls_made == 0 and completer.calls == 1
    roomy = await compressor.compress(messages, make_settings())
    assert roomy.cache_hit and long_summary in summary_of(roomy.messages)


@pytest.mark.anyio
async def test_compress_returns_the_request_unchanged_when_nothing_is_old() -> None:
    compressor, completer, cache = make()
    messages = conversation(1)
    result = await compressor.compress(messages, make_settings())
    assert result.messages == messages and result.messages is not messages
    assert (result.summarized, result.summarized_count, result.calls_made, result.cache_hit) == (
        None,
        0,
        0,
        False,
    )
    assert result.tokens_after == result.tokens_before == COUNTER.count_messages(messages)
    assert completer.calls == 0 and cache.gets == 0


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"cheap_model": ""}, "cheap_model"),
        ({"keep_recent_turns": -1}, "keep_recent_turns"),
        ({"keep_recent_tokens": -5}, "keep_recent_tokens"),
        ({"target_tokens": 0}, "target_tokens"),
        ({"max_concurrency": 0}, "max_concurrency"),
        ({"lock_ttl": 0}, "lock_ttl"),
        ({"poll_interval": -1}, "poll_interval"),
        ({"chunk_tokens": 999}, "fewer than two summaries"),
        ({"cheap_context_tokens": 2_000}, "fewer than two summaries"),
        ({"keep_recent_max_tokens": 0}, "keep_recent_max_tokens"),
        ({"excerpt_head_tokens": -1}, "excerpt_head_tokens"),
        ({"excerpt_head_tokens": 0, "excerpt_tail_tokens": 0}, "at least one token"),
        ({"reuse_tokens": 99_999}, "reuse_tokens must be at least 100000"),
        ({"summary_parts_max_tokens": 499}, "summary_parts_max_tokens must be at least 500"),
        ({"pinned_tokens": -1}, "pinned_tokens"),
        ({"pin_max_tokens": 0}, "pin_max_tokens"),
        ({"recall_tokens": -1}, "recall_tokens"),
    ],
)
def test_summary_settings_reject_unusable_values(overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make_settings(**overrides)


def test_summary_settings_budget_per_call_is_the_smaller_of_chunk_and_window() -> None:
    assert make_settings(chunk_tokens=10_000).transcript_budget == 10_000
    assert make_settings(cheap_context_tokens=8_000, summary_max_tokens=500).transcript_budget == 6_500
    with pytest.raises(TypeError):
        SummarySettings("cheap", 100)  # type: ignore[call-arg]
