"""What stays verbatim: the aim, the floor and the cap (tool outputs cut to head/tail excerpts)."""

from __future__ import annotations

import random
from dataclasses import replace

import orjson
import pytest

from compressors.protocols import Message
from compressors.summary import CannotCompress, SummarizeOldTurns
from compressors.summary.excerpts import apply, excerpt_message, head_tail, shrink
from compressors.summary.selection import group_blocks, select
from tests.compressors.test_summary_fakes import (
    CharCounter,
    DictCache,
    ScriptedCompleter,
    assert_tool_pairs_intact,
    conversation,
    make_settings,
    summary_messages,
    tool_exchange,
    tool_loop,
)
from tests.fixtures.haystack import TiktokenCounter, o200k_encoding

COUNTER = CharCounter()
WORDS = "alpha beta gamma delta build error file path config value module import line test".split()


@pytest.fixture(scope="module")
def tiktoken_counter() -> TiktokenCounter:
    return TiktokenCounter(o200k_encoding())


def noise(seed: int, words: int) -> str:
    rng = random.Random(seed)
    return " ".join(f"{rng.choice(WORDS)}{rng.randint(0, 99)}" for _ in range(words))


def make(counter: object = COUNTER) -> tuple[SummarizeOldTurns, ScriptedCompleter]:
    completer = ScriptedCompleter()
    return SummarizeOldTurns(counter=counter, completer=completer, cache=DictCache()), completer  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_tool_loop_old_calls_are_summarised_and_the_aim_is_respected(
    tiktoken_counter: TiktokenCounter,
) -> None:
    messages = tool_loop([noise(n, 1_000) for n in range(20)])
    sizes = [tiktoken_counter.count_messages(messages[i : i + 2]) - 3 for i in range(2, len(messages), 2)]
    assert all(1_500 < size < 2_600 for size in sizes)
    compressor, completer = make(tiktoken_counter)
    settings = make_settings(keep_recent_turns=0, keep_recent_tokens=10_000)
    result = await compressor.compress(messages, settings)
    start = len(messages) - len(result.messages) + 3
    kept_blocks = (len(messages) - start) // 2
    assert sum(sizes[-kept_blocks:]) <= 10_000 < sum(sizes[-kept_blocks - 1 :])
    assert result.messages[:2] == messages[:2] and result.messages[1] is messages[1]
    assert summary_messages(result.messages) == [result.messages[2]["content"]]
    assert f"(messages 3\u2013{start})" in result.messages[2]["content"]
    assert result.messages[3:] == messages[start:]
    assert result.summarized == range(2, start) and result.parts == 1
    assert "[2] user: fix the build" in completer.material(0)
    assert f"[{start}] tool (result of call call_{(start - 3) // 2})" in completer.material(0)
    assert_tool_pairs_intact(result.messages)


@pytest.mark.anyio
async def test_tool_loop_under_a_floor_of_one_turn_is_kept_whole() -> None:
    messages = tool_loop([noise(n, 300) for n in range(20)])
    compressor, completer = make()
    result = await compressor.compress(messages, make_settings(keep_recent_turns=1, keep_recent_tokens=500))
    assert (result.summarized, result.messages, completer.calls) == (None, messages, 0)


@pytest.mark.anyio
async def test_tool_loop_whose_floor_is_the_whole_conversation_keeps_what_the_cap_holds(
    tiktoken_counter: TiktokenCounter,
) -> None:
    """One user turn is the whole loop: with a cap, its older calls are summarised rather than nothing."""
    messages = tool_loop([noise(n, 1_000) for n in range(20)])
    compressor, _ = make(tiktoken_counter)
    settings = make_settings(keep_recent_turns=2, keep_recent_tokens=5_000, keep_recent_max_tokens=12_000)
    result = await compressor.compress(messages, settings)
    assert result.summarized is not None and result.parts == 1
    kept = result.messages[3:]
    assert 5_000 < tiktoken_counter.count_messages(kept) <= 12_000 + 3
    assert kept == messages[len(messages) - len(kept) :]  # verbatim, whole blocks
    assert_tool_pairs_intact(result.messages)


def recent_tools_conversation(outputs: int = 3, size: int = 3_000) -> list[Message]:
    """Two old turns, then a turn of tool calls with large outputs, then the latest question."""
    messages = conversation(2)
    messages.append({"role": "user", "content": "run the checks"})
    messages += tool_loop([f"out{n} " + noise(n, size // 8) for n in range(outputs)])[2:]
    messages += [{"role": "assistant", "content": "done"}, {"role": "user", "content": "ok?"}]
    return messages


CAP = {"keep_recent_turns": 2, "excerpt_head_tokens": 100, "excerpt_tail_tokens": 50}


def kept_tokens(messages: list[Message]) -> int:
    return COUNTER.count_messages([messages[0], *messages[5:]])


@pytest.mark.anyio
async def test_cap_excerpts_the_oldest_tool_outputs_of_the_kept_part_first() -> None:
    messages = recent_tools_conversation()
    settings = make_settings(**CAP)
    first_output = messages[7]
    saving = COUNTER.count_messages([first_output]) - COUNTER.count_messages(
        [excerpt_message(first_output, settings, COUNTER)]  # type: ignore[list-item]
    )
    cap = kept_tokens(messages) - saving - 1
    compressor, _ = make()
    result = await compressor.compress(messages, make_settings(**CAP, keep_recent_max_tokens=cap))
    assert result.excerpted == 2
    tools = [m for m in result.messages if m["role"] == "tool"]
    assert len(tools) == 3 and tools[2] is messages[11]
    for original, cut in zip([messages[7], messages[9]], tools[:2], strict=True):
        text = original["content"]
        left_out = len(text) - 150
        assert cut["content"] == (
            f"{text[:100]}\n[\u2026 {left_out:,} tokens of this tool output left out by the gateway \u2026]\n"
            f"{text[-50:]}"
        )
        assert cut["tool_call_id"] == original["tool_call_id"]
    assert len(result.messages) == len(messages) - 4 + 1
    assert_tool_pairs_intact(result.messages)
    assert COUNTER.count_messages([m for m in result.messages if m is not result.messages[1]]) <= cap
    again, _ = make()
    same = await again.compress(messages, make_settings(**CAP, keep_recent_max_tokens=cap))
    assert orjson.dumps(same.messages) == orjson.dumps(result.messages)


@pytest.mark.anyio
async def test_cap_excerpts_every_tool_output_when_even_that_is_not_enough() -> None:
    messages = recent_tools_conversation()
    compressor, _ = make()
    result = await compressor.compress(messages, make_settings(**CAP, keep_recent_max_tokens=1))
    assert result.excerpted == 3
    assert all("left out by the gateway" in m["content"] for m in result.messages if m["role"] == "tool")


@pytest.mark.anyio
async def test_cap_leaves_the_kept_part_alone_when_it_fits() -> None:
    messages = recent_tools_conversation()
    compressor, _ = make()
    cap = kept_tokens(messages)
    result = await compressor.compress(messages, make_settings(**CAP, keep_recent_max_tokens=cap))
    assert result.excerpted == 0 and result.messages[2:] == messages[5:]


@pytest.mark.anyio
async def test_cap_excerpts_are_reproduced_on_reuse_while_newer_outputs_stay_whole() -> None:
    turn1 = recent_tools_conversation()
    settings = make_settings(**CAP, keep_recent_max_tokens=kept_tokens(turn1) - 100, reuse_tokens=10**6)
    compressor, completer = make()
    first = await compressor.compress(turn1, settings)
    assert first.excerpted == 1
    turn2 = [*turn1, {"role": "assistant", "content": "yes"}, {"role": "user", "content": "more checks"}]
    turn2 += tool_loop([noise(50, 600), noise(51, 600)])[2:]
    turn2 += [{"role": "assistant", "content": "checked"}, {"role": "user", "content": "and?"}]
    for turn in (
        turn2,
        [*turn2, {"role": "assistant", "content": "fine"}, {"role": "user", "content": "bye"}],
    ):
        result = await compressor.compress(turn, settings)
        assert (result.reused, result.calls_made, result.excerpted, completer.calls) == (True, 0, 1, 1)
        assert orjson.dumps(result.messages[: len(first.messages)]) == orjson.dumps(first.messages)
        assert all(any(m is new for m in result.messages) for new in (turn2[-5], turn2[-3]))


@pytest.mark.anyio
async def test_cap_does_not_save_a_kept_part_over_the_target() -> None:
    messages = recent_tools_conversation()
    settings = make_settings(**CAP, keep_recent_max_tokens=1, target_tokens=10)
    compressor, completer = make()
    with pytest.raises(CannotCompress, match="over the target of 10") as caught:
        await compressor.compress(messages, settings)
    assert caught.value.kept_tokens < kept_tokens(messages)
    assert completer.calls == 0


def test_head_tail_keeps_both_ends_around_a_marker() -> None:
    text = "".join(chr(ord("a") + n % 26) for n in range(2_000))
    assert head_tail(text, head=10, tail=5, counter=COUNTER, noun="tool output") == (
        f"{text[:10]}\n[\u2026 1,985 tokens of this tool output left out by the gateway \u2026]\n{text[-5:]}"
    )
    assert head_tail(text, head=0, tail=5, counter=COUNTER, noun="x") == (
        f"[\u2026 1,995 tokens of this x left out by the gateway \u2026]\n{text[-5:]}"
    )
    assert head_tail(text, head=10, tail=0, counter=COUNTER, noun="x") == (
        f"{text[:10]}\n[\u2026 1,990 tokens of this x left out by the gateway \u2026]"
    )
    assert head_tail(text[:40], head=4, tail=4, counter=COUNTER, noun="x") is None


def test_excerpts_apply_skips_refs_that_no_longer_name_a_long_tool_output() -> None:
    messages = recent_tools_conversation()
    messages[9] = {**messages[9], "content": "short"}
    selection = select(messages, settings=make_settings(**CAP), counter=COUNTER)
    blocks = group_blocks(messages)
    assert blocks[5].indices == (6, 7) and selection.split == 4
    refs = [(5, 1), (5, 0), (6, 1), (7, 5), (99, 0)]
    cut = apply(messages, selection, refs, settings=make_settings(**CAP), counter=COUNTER)
    assert list(cut) == [7]


def test_shrink_skips_a_tool_output_too_short_to_excerpt() -> None:
    messages = recent_tools_conversation()
    messages[7] = {**messages[7], "content": "short output"}
    settings = make_settings(**CAP, keep_recent_max_tokens=1)
    selection = select(messages, settings=settings, counter=COUNTER)
    refs = shrink(messages, selection, verbatim=range(len(messages)), settings=settings, counter=COUNTER)
    assert refs == ((6, 1), (7, 1))


@pytest.mark.anyio
async def test_a_conversation_without_user_messages_has_fewer_turns_than_any_floor() -> None:
    messages: list[Message] = [{"role": "system", "content": "s"}]
    messages += [{"role": "assistant", "content": f"note {n} " + "n" * 100} for n in range(6)]
    recent = COUNTER.count_messages(messages[-2:]) - COUNTER.count_messages([])
    compressor, _ = make()
    floor = await compressor.compress(messages, make_settings(keep_recent_turns=1, keep_recent_tokens=recent))
    assert floor.summarized is None
    result = await compressor.compress(
        messages, make_settings(keep_recent_turns=0, keep_recent_tokens=recent)
    )
    assert result.summarized == range(1, 5) and result.messages[2:] == messages[5:]


SECRET = "The deploy password for the staging cluster is ZEBRA-7731."


def checks_turn(answered: str = "not found") -> list[Message]:
    """Old turns, then a turn of three long tool outputs (the first hides a fact in its middle), then a
    lookup call whose output the model is about to answer."""
    outputs = [noise(n, 2_000) for n in range(3)]
    outputs[0] = outputs[0][:6_000] + f"\n{SECRET}\n" + outputs[0][6_000:]
    messages = conversation(2)
    messages.append({"role": "user", "content": "deploy the service to staging"})
    messages += tool_loop(outputs)[2:]
    lookup = tool_exchange(9)
    lookup[0]["tool_calls"][0]["function"] = {"name": "vault", "arguments": '{"query": "staging password"}'}
    lookup[1]["content"] = answered
    return [*messages, *lookup]


@pytest.mark.anyio
async def test_cap_never_cuts_the_outputs_the_model_is_about_to_answer(
    tiktoken_counter: TiktokenCounter,
) -> None:
    messages = checks_turn(answered=noise(77, 2_000))
    messages[-2]["tool_calls"] += tool_exchange(10, calls=2)[0]["tool_calls"]
    messages += [
        {"role": "tool", "tool_call_id": f"call_10_{k}", "content": noise(80 + k, 2_000)} for k in (0, 1)
    ]
    compressor, _ = make(tiktoken_counter)
    settings = make_settings(**CAP, keep_recent_max_tokens=1)
    result = await compressor.compress(messages, settings)
    assert result.excerpted == 3  # the three outputs already answered, oldest first
    answered = messages[-3:]
    assert all(any(kept is output for kept in result.messages) for output in answered)
    cut = [m for m in result.messages if "left out by the gateway" in str(m.get("content"))]
    assert [m["tool_call_id"] for m in cut] == ["call_0", "call_1", "call_2"]
    assert_tool_pairs_intact(result.messages)


def test_shrink_and_apply_spare_the_outputs_after_the_last_tool_call_only() -> None:
    messages = checks_turn(answered=noise(77, 2_000))
    settings = make_settings(**CAP, keep_recent_max_tokens=1)
    selection = select(messages, settings=settings, counter=COUNTER)
    refs = shrink(messages, selection, verbatim=range(len(messages)), settings=settings, counter=COUNTER)
    last = len(selection.blocks) - 1
    assert (last, 1) not in refs and len(refs) == 3
    assert len(apply(messages, selection, [*refs, (last, 1)], settings=settings, counter=COUNTER)) == 3
    answered_once = [*messages, {"role": "assistant", "content": "the vault has nothing"}]
    selection = select(answered_once, settings=settings, counter=COUNTER)
    refs = shrink(
        answered_once, selection, verbatim=range(len(answered_once)), settings=settings, counter=COUNTER
    )
    assert len(refs) == 4  # answered by an assistant message: an old output like the others


@pytest.mark.anyio
async def test_what_an_excerpt_leaves_out_is_recalled_for_a_question_about_it(
    tiktoken_counter: TiktokenCounter,
) -> None:
    messages = checks_turn()
    compressor, _ = make(tiktoken_counter)
    settings = make_settings(**CAP, keep_recent_max_tokens=1, recall_tokens=2_000)
    result = await compressor.compress(messages, settings)
    assert result.summarized == range(1, 3) and result.excerpted == 3
    [excerpted] = [m for m in result.messages if m.get("tool_call_id") == "call_0"]
    assert "left out by the gateway" in excerpted["content"] and SECRET not in excerpted["content"]
    [recalled] = [m for m in result.messages if SECRET in str(m.get("content"))]
    assert "[from message 8]" in recalled["content"]  # the excerpted output, position 7
    again, _ = make(tiktoken_counter)
    assert orjson.dumps((await again.compress(messages, settings)).messages) == orjson.dumps(result.messages)


def long_agent_turn(calls: int) -> list[Message]:
    """An earlier exchange, then the current turn: a task and ``calls`` tool calls with long outputs."""
    messages = conversation(1)
    messages.append({"role": "user", "content": "fix the build"})
    return messages + tool_loop([noise(n, 300) for n in range(calls)])[2:]


@pytest.mark.anyio
async def test_a_current_turn_over_the_target_has_its_older_calls_summarised_too() -> None:
    """The floor keeps the whole current turn, over the target: its older calls are summarised (pairs
    whole), the call the model is about to answer stays verbatim, and the next step reuses it all."""
    messages = long_agent_turn(12)
    settings = make_settings(keep_recent_turns=1, keep_recent_tokens=5_000, target_tokens=12_000)
    assert COUNTER.count_messages(messages[3:]) > 12_000
    compressor, completer = make()
    result = await compressor.compress(messages, settings)
    assert result.tokens_after <= 12_000
    assert result.summarized is not None and max(result.summarized) > 3  # calls of the current turn
    assert messages[3] in result.messages  # the task, the last user message
    assert result.messages[-2:] == messages[-2:] and result.messages[-1] is messages[-1]
    assert_tool_pairs_intact(result.messages)
    step = messages + tool_loop([noise(40, 300)])[2:]
    step[-2]["tool_calls"][0]["id"] = step[-1]["tool_call_id"] = "call_next"
    after = await compressor.compress(step, replace(settings, reuse_tokens=100_000))
    assert (after.reused, completer.calls) == (True, 1)
    assert orjson.dumps(after.messages[: len(result.messages)]) == orjson.dumps(result.messages)


@pytest.mark.anyio
async def test_outputs_the_model_answers_over_the_target_are_kept_whole_within_the_reuse_limit() -> None:
    """The newest call's outputs together are over the target: nothing may cut them (the model is about to
    read them), so everything older is summarised and the compaction is held to the reuse limit instead."""
    messages = tool_loop(["x" * 2_000 for _ in range(6)])
    exchange = tool_exchange(9, calls=3)
    for message in exchange[1:]:
        message["content"] = "y" * 3_000
    messages += exchange
    settings = make_settings(
        keep_recent_turns=0, keep_recent_tokens=1_000, target_tokens=5_000, reuse_tokens=20_000
    )
    compressor, completer = make()
    result = await compressor.compress(messages, settings)
    assert result.messages[-4:] == exchange  # the call and its three outputs, whole
    assert 5_000 < result.tokens_after <= 20_000
    assert completer.calls >= 1 and result.summarized_count > 0
    with pytest.raises(CannotCompress, match="over the reuse limit of 8000"):  # and no further
        await make()[0].compress(messages, replace(settings, reuse_tokens=8_000))


@pytest.mark.anyio
async def test_a_current_turn_outgrowing_the_reuse_limit_is_recut_by_the_cap_not_failed() -> None:
    """Nothing older is left to summarise once the compaction covers the old turns: an agent's current
    turn piling up tool outputs keeps the summary and cuts its oldest outputs, without a cheap call."""
    turn1 = recent_tools_conversation()
    compressor, completer = make()
    first = await compressor.compress(turn1, make_settings(**CAP, keep_recent_max_tokens=kept_tokens(turn1)))
    assert first.excerpted == 0
    turn2 = [*turn1, *tool_loop([noise(60, 600), noise(61, 600)])[2:]]
    cap = kept_tokens(turn1)
    limit = first.tokens_after + 10
    settings = make_settings(**CAP, keep_recent_max_tokens=cap, reuse_tokens=limit, target_tokens=limit)
    result = await compressor.compress(turn2, settings)
    assert (result.reused, result.calls_made, completer.calls) == (False, 0, 1)
    assert result.excerpted > 0 and result.tokens_after <= settings.target_tokens
    assert orjson.dumps(result.messages[:2]) == orjson.dumps(first.messages[:2])  # the summary kept
    assert_tool_pairs_intact(result.messages)
    again = await compressor.compress(turn2, settings)  # the recut is cached: the same bytes again
    assert orjson.dumps(again.messages) == orjson.dumps(result.messages)
