from __future__ import annotations

import re
from collections.abc import Sequence

import pytest

from compressors.protocols import Message
from compressors.summary import SummarizeOldTurns, SummaryFailed
from compressors.summary.summarizer import _pack
from tests.compressors.test_summary_fakes import (
    CharCounter,
    DictCache,
    ScriptedCompleter,
    assert_tool_pairs_intact,
    good_summary,
    make_settings,
    tool_exchange,
)

COUNTER = CharCounter()
CHUNKED = {"chunk_tokens": 1_200, "summary_max_tokens": 300, "max_concurrency": 2}


def long_conversation(rounds: int) -> list[Message]:
    messages: list[Message] = [{"role": "system", "content": "agent"}]
    for n in range(1, rounds + 1):
        messages.append({"role": "user", "content": f"step {n} " + "u" * 150})
        messages += tool_exchange(n, calls=2)
        messages.append({"role": "assistant", "content": f"done {n} " + "a" * 150})
    return messages


def tagged(number: int, prompt: Sequence[Message]) -> str:
    kind = "merge" if "<transcript>" not in str(prompt[-1]["content"]) else "chunk"
    return good_summary(f"{kind} {number}")


def transcript_of(material: str) -> str:
    match = re.search(r"<transcript>\n(.*)\n</transcript>", material, re.S)
    assert match is not None
    return match.group(1)


@pytest.mark.anyio
async def test_chunked_path_summarises_chunks_with_bounded_concurrency_then_merges() -> None:
    completer = ScriptedCompleter(delay=0.02, default=tagged)
    compressor = SummarizeOldTurns(counter=COUNTER, completer=completer, cache=DictCache())
    messages = long_conversation(12)
    result = await compressor.compress(messages, make_settings(**CHUNKED))
    settings = make_settings(**CHUNKED)
    chunk_calls = [n for n in range(completer.calls) if "<transcript>" in completer.material(n)]
    merge_calls = [n for n in range(completer.calls) if n not in chunk_calls]
    assert len(chunk_calls) >= 4 and merge_calls
    assert completer.peak == 2
    assert result.calls_made == completer.calls
    for n in chunk_calls:
        transcript = transcript_of(completer.material(n))
        assert COUNTER.count_text(transcript) <= settings.transcript_budget
        for call_id in re.findall(r"result of call (\w+)", transcript):
            assert f"-> tool call {call_id}:" in transcript
    numbers = [
        int(x)
        for n in chunk_calls
        for x in re.findall(r"^\[(\d+)\]", transcript_of(completer.material(n)), re.M)
    ]
    assert numbers == sorted(numbers) == list(range(2, numbers[-1] + 1))
    assert "merge" in str(result.messages[1]["content"])
    assert_tool_pairs_intact(result.messages)


@pytest.mark.anyio
async def test_chunked_path_merges_in_rounds_when_the_summaries_do_not_fit_one_call() -> None:
    def wordy(number: int, prompt: Sequence[Message]) -> str:
        return good_summary(f"part {number} " + "w" * 450)

    completer = ScriptedCompleter(default=wordy)
    compressor = SummarizeOldTurns(counter=COUNTER, completer=completer, cache=DictCache())
    result = await compressor.compress(long_conversation(12), make_settings(**CHUNKED, target_tokens=10**6))
    merges = [
        completer.material(n) for n in range(completer.calls) if "<transcript>" not in completer.material(n)
    ]
    assert len(merges) >= 2
    assert all(m.count("<summary part=") == 2 for m in merges[:-1])
    assert result.summarized_count > 0


@pytest.mark.anyio
async def test_chunked_path_cuts_the_middle_of_a_block_too_large_for_one_call() -> None:
    completer = ScriptedCompleter()
    compressor = SummarizeOldTurns(counter=COUNTER, completer=completer, cache=DictCache())
    huge = "HEAD " + "x" * 5_000 + " TAIL"
    messages: list[Message] = [
        {"role": "user", "content": "read it"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "cat", "arguments": "{}"}},
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": huge},
        {"role": "user", "content": "now?"},
    ]
    await compressor.compress(messages, make_settings(**CHUNKED))
    transcripts = [
        transcript_of(completer.material(n))
        for n in range(completer.calls)
        if "<transcript>" in completer.material(n)
    ]
    clipped = next(t for t in transcripts if "HEAD" in t)
    assert "TAIL" in clipped and "tokens left out here by the gateway" in clipped
    assert COUNTER.count_text(clipped) <= make_settings(**CHUNKED).transcript_budget


@pytest.mark.anyio
async def test_chunked_path_raises_summary_failed_when_a_chunk_fails() -> None:
    error = RuntimeError("cheap model down")
    completer = ScriptedCompleter(script=[error], delay=0.01)
    compressor = SummarizeOldTurns(counter=COUNTER, completer=completer, cache=DictCache())
    with pytest.raises(SummaryFailed, match="cheap model down") as caught:
        await compressor.compress(long_conversation(12), make_settings(**CHUNKED))
    assert isinstance(caught.value.__cause__, SummaryFailed)
    assert caught.value.__cause__.__cause__ is error
    assert caught.value.calls_made >= 1


@pytest.mark.anyio
async def test_chunked_appended_part_summarises_only_the_newer_blocks_without_the_earlier_summary() -> None:
    completer = ScriptedCompleter(default=tagged)
    cache = DictCache()
    compressor = SummarizeOldTurns(counter=COUNTER, completer=completer, cache=cache)
    turn1 = long_conversation(3)
    first = await compressor.compress(turn1, make_settings(**CHUNKED))
    calls_before = completer.calls
    turn2 = long_conversation(14)
    second = await compressor.compress(
        turn2, make_settings(**CHUNKED, target_tokens=len(str(first.messages)) + 2_000)
    )
    assert second.calls_made == completer.calls - calls_before and not second.cache_hit
    previous = str(first.messages[1]["content"]).split("\n\n", 1)[1]
    new_calls = range(calls_before, completer.calls)
    assert all("step 1 " not in completer.material(n) for n in new_calls)
    assert all(previous not in completer.material(n) for n in new_calls)
    assert len(new_calls) > 2 and second.parts == 2
    assert second.messages[1] == first.messages[1]
    assert "continued: part 2" in str(second.messages[2]["content"])
    assert_tool_pairs_intact(second.messages)


@pytest.mark.parametrize(
    ("sizes", "budget", "minimum", "groups"),
    [
        ([], 10, 1, []),
        ([4, 4, 4], 10, 1, [[0, 1], [2]]),
        ([11, 3], 10, 1, [[0], [1]]),
        ([8, 8, 8], 10, 2, [[0, 1], [2]]),
        ([5, 5, 5, 5], 10, 2, [[0, 1], [2, 3]]),
    ],
)
def test_pack_groups_consecutive_items_within_the_budget(
    sizes: list[int], budget: int, minimum: int, groups: list[list[int]]
) -> None:
    sized = [(str(n), size) for n, size in enumerate(sizes)]
    assert _pack(sized, budget, minimum=minimum) == [[str(n) for n in group] for group in groups]


class Finishing(ScriptedCompleter):
    """Counts the calls that returned (a cancelled call never does)."""

    finished: int = 0

    async def complete(self, messages: Sequence[Message], *, max_tokens: int) -> str:
        answer = await super().complete(messages, max_tokens=max_tokens)
        self.finished += 1
        return answer


@pytest.mark.anyio
async def test_a_failing_chunk_lets_the_calls_already_sent_finish_and_sends_no_more() -> None:
    """The provider bills a call it received whether or not the gateway waits for it, and only a call
    that returns reaches the ledger: the other chunk in flight is waited for, the ones queued are dropped."""
    completer = Finishing(script=[RuntimeError("cheap model down")], delay=0.02)
    compressor = SummarizeOldTurns(counter=COUNTER, completer=completer, cache=DictCache())
    with pytest.raises(SummaryFailed, match="cheap model down") as caught:
        await compressor.compress(long_conversation(12), make_settings(**CHUNKED))
    assert completer.calls == 2  # two at once (max_concurrency): the first failed, no third was sent
    assert completer.finished == 1  # the second ran to its answer instead of being cancelled
    assert caught.value.calls_made == 2
