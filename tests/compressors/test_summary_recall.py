"""Recall: the summarised turns' excerpts that the latest request asks about, placed before its newest
step (never last)."""

from __future__ import annotations

import random

import orjson
import pytest

from compressors.lru import Lru
from compressors.protocols import Message
from compressors.retrieval.index import DocumentIndex
from compressors.summary import SummarizeOldTurns
from compressors.summary.assembly import RECALL_OPENING
from compressors.summary.recall import HEADER, Recalled, document, place, question, recall
from tests.compressors.test_summary_fakes import (
    CharCounter,
    DictCache,
    ScriptedCompleter,
    assert_tool_pairs_intact,
    conversation,
    make_settings,
    tool_exchange,
    tool_loop,
)
from tests.fixtures.haystack import ProseGenerator, TiktokenCounter, o200k_encoding

WORDS = "alpha beta gamma delta build error file path config value module import line test".split()
SECRET = "The deploy password for the staging cluster is ZEBRA-7731."


@pytest.fixture(scope="module")
def counter() -> TiktokenCounter:
    return TiktokenCounter(o200k_encoding())


def noise(seed: int, words: int) -> str:
    rng = random.Random(seed)
    lines = [
        " ".join(f"{rng.choice(WORDS)}{rng.randint(0, 99)}" for _ in range(12)) for _ in range(words // 12)
    ]
    return "\n".join(lines)


def make(counter: object) -> tuple[SummarizeOldTurns, DictCache]:
    cache = DictCache()
    compressor = SummarizeOldTurns(counter=counter, completer=ScriptedCompleter(), cache=cache)  # type: ignore[arg-type]
    return compressor, cache


def agent_loop() -> list[Message]:
    outputs = [noise(n, 1_000) for n in range(20)]
    outputs[3] = outputs[3][:3_000] + f"\n{SECRET}\n" + outputs[3][3_000:]
    messages = tool_loop(outputs, task="deploy the service to staging")
    lookup: Message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_lookup",
                "type": "function",
                "function": {"name": "vault_lookup", "arguments": '{"query": "staging deploy password"}'},
            }
        ],
    }
    return [*messages, lookup, {"role": "tool", "tool_call_id": "call_lookup", "content": "not found"}]


LOOP = {"keep_recent_turns": 0, "keep_recent_tokens": 6_000, "recall_tokens": 2_000}


def recalled_of(messages: list[Message]) -> list[Message]:
    return [m for m in messages if str(m.get("content", "")).startswith(RECALL_OPENING)]


@pytest.mark.anyio
async def test_recall_brings_back_a_fact_from_an_old_tool_output_before_the_newest_step_of_a_loop(
    counter: TiktokenCounter,
) -> None:
    messages = agent_loop()
    compressor, _ = make(counter)
    result = await compressor.compress(messages, make_settings(**LOOP))
    assert 9 in result.summarized  # type: ignore[operator]
    *before, recall_message, call, output = result.messages
    assert (call, output) == (messages[-2], messages[-1])  # the step the model answers comes last
    assert all(SECRET not in str(m.get("content")) for m in before)
    assert recalled_of(result.messages) == [recall_message] and SECRET in recall_message["content"]
    assert "[from message 10]\n" in recall_message["content"]
    assert result.recalled_chunks >= 1
    assert counter.count_messages([recall_message]) - 3 <= 2_000
    assert result.tokens_after == counter.count_messages(result.messages)
    assert_tool_pairs_intact(result.messages)


def chat_with_a_paste() -> list[Message]:
    paste = noise(90, 1_500) + "\nmax_connections = 417 # raised after the outage\n" + noise(91, 1_500)
    messages: list[Message] = [
        {"role": "system", "content": "You are helpful."},
        {"role": "user", "content": f"Here is our database config:\n{paste}"},
        {"role": "assistant", "content": "Thanks, I read it."},
    ]
    for n in range(1, 5):
        messages += [
            {"role": "user", "content": f"step {n}: " + noise(n, 60)},
            {"role": "assistant", "content": f"done {n}: " + noise(100 + n, 60)},
        ]
    return [*messages, {"role": "user", "content": "What was max_connections in the config I pasted?"}]


@pytest.mark.anyio
async def test_recall_brings_back_a_line_of_an_old_paste_right_before_the_latest_question(
    counter: TiktokenCounter,
) -> None:
    messages = chat_with_a_paste()
    compressor, _ = make(counter)
    result = await compressor.compress(messages, make_settings(recall_tokens=1_500))
    recall_message, latest = result.messages[-2:]
    assert latest is messages[-1]
    assert recalled_of(result.messages) == [recall_message]
    assert "max_connections = 417" in recall_message["content"]
    assert "[from message 2]" in recall_message["content"]


@pytest.mark.anyio
async def test_recall_follows_the_question_while_the_prefix_before_it_stays_the_same(
    counter: TiktokenCounter,
) -> None:
    messages = chat_with_a_paste()
    compressor, _ = make(counter)
    settings = make_settings(recall_tokens=1_500, reuse_tokens=10**6)
    first = await compressor.compress(messages, settings)
    later = [
        *messages,
        {"role": "assistant", "content": "It was 417."},
        {"role": "user", "content": "Which value did step 3 use for build alpha7?"},
    ]
    second = await compressor.compress(later, settings)
    assert second.reused
    assert orjson.dumps(second.messages[: len(first.messages) - 2]) == orjson.dumps(first.messages[:-2])
    assert recalled_of(second.messages) == [second.messages[-2]]
    assert second.messages[-2]["content"] != first.messages[-2]["content"]
    assert second.messages[-4:-2] == later[-3:-1] and second.messages[-1] is later[-1]


@pytest.mark.anyio
async def test_recall_is_left_out_when_no_chunk_scores_above_zero(counter: TiktokenCounter) -> None:
    messages = [*chat_with_a_paste()[:-1], {"role": "user", "content": "xyzzy plugh?"}]
    compressor, _ = make(counter)
    result = await compressor.compress(messages, make_settings(recall_tokens=1_500))
    assert recalled_of(result.messages) == [] and result.recalled_chunks == 0
    assert result.messages[-1] is messages[-1]


def prose(seed: int, sentences: int) -> str:
    generator = ProseGenerator(seed)
    return " ".join(generator.sentence() for _ in range(sentences))


@pytest.mark.anyio
async def test_recall_is_left_out_when_the_question_singles_out_no_chunk(counter: TiktokenCounter) -> None:
    """A long message of prose like everything before it (its words match every chunk about as well) asks
    for nothing in particular: no recall, so what follows it stays cached. A pointed question does."""
    messages: list[Message] = [{"role": "system", "content": "You are helpful."}]
    for turn in range(8):
        text = prose(turn, 120)
        if turn == 1:
            text += " The pool sets max_connections to 417 since the outage."
        messages += [
            {"role": "user", "content": text},
            {"role": "assistant", "content": prose(50 + turn, 10)},
        ]
    vague = prose(99, 60)
    compressor, _ = make(counter)
    settings = make_settings(recall_tokens=1_500)
    result = await compressor.compress([*messages, {"role": "user", "content": vague}], settings)
    assert result.summarized_count > 0
    assert recalled_of(result.messages) == [] and result.recalled_chunks == 0
    pointed = "Also, what did the pool set max_connections to?"
    result = await compressor.compress([*messages, {"role": "user", "content": pointed}], settings)
    [recall_message] = recalled_of(result.messages)
    assert "max_connections to 417" in recall_message["content"]


@pytest.mark.anyio
async def test_recall_fits_in_what_the_limit_leaves(counter: TiktokenCounter) -> None:
    messages = chat_with_a_paste()
    compressor, _ = make(counter)
    bare = await compressor.compress(messages, make_settings())
    room = make_settings(recall_tokens=1_500, target_tokens=bare.tokens_after + 300)
    result = await compressor.compress(messages, room)
    assert result.recalled_chunks == 0 and result.tokens_after == bare.tokens_after


@pytest.mark.anyio
async def test_recall_index_is_cached_and_read_back_on_the_next_turn(counter: TiktokenCounter) -> None:
    messages = chat_with_a_paste()
    compressor, cache = make(counter)
    settings = make_settings(recall_tokens=1_500, reuse_tokens=10**6)
    first = await compressor.compress(messages, settings)
    [key] = cache.keys("summary-recall:")
    stored = cache.values[key]
    again = await compressor.compress(messages, settings)
    assert cache.values[key] is stored and cache.keys("summary-recall:") == [key]
    assert again.messages == first.messages


@pytest.mark.anyio
async def test_recall_merges_neighbouring_chunks_and_names_the_messages_they_span() -> None:
    counter = CharCounter()
    messages: list[Message] = [
        {"role": "user", "content": f"note {n}: " + ("kiwi " if n in (3, 4) else "plum ") * 120}
        for n in range(8)
    ]
    replaced = list(range(7))
    found = await recall(
        messages,
        replaced,
        asked="kiwi",
        budget=4_000,
        counter=counter,
        cache=DictCache(),
        ttl_seconds=60,
    )
    assert found is not None
    content = found.message["content"]
    assert content.count("[from ") == 1 and "[from messages 4\u20135]" in content
    assert found.chunks >= 2 and "[4] user: note 3" in content and "[5] user: note 4" in content


@pytest.mark.anyio
async def test_recall_needs_a_question_a_span_and_room_for_its_header() -> None:
    counter = CharCounter()
    messages: list[Message] = [{"role": "user", "content": "kiwi " * 200}, {"role": "user", "content": "?"}]
    options = {"counter": counter, "cache": DictCache(), "ttl_seconds": 60}
    assert await recall(messages, [0], asked="", budget=100, **options) is None  # type: ignore[arg-type]
    assert await recall(messages, [], asked="kiwi", budget=100, **options) is None  # type: ignore[arg-type]
    assert await recall(messages, [0], asked="kiwi", budget=0, **options) is None  # type: ignore[arg-type]
    assert await recall(messages, [0], asked="kiwi", budget=100, **options) is None  # type: ignore[arg-type]


def test_question_is_the_latest_user_text_or_the_tool_calls_made_since() -> None:
    calls = tool_loop(["x"])[2:]
    old_call: Message = {**calls[0], "tool_calls": [{"function": {"name": "f", "arguments": {"old": 1}}}]}
    messages: list[Message] = [old_call, {"role": "user", "content": "find the bug"}, *calls]
    assert question(messages, 1) == '{"path": "src/f0.py"}'  # mid-loop: what the agent looks for now
    assert question(messages[:2], 1) == "find the bug"
    legacy: Message = {"role": "assistant", "function_call": {"name": "f", "arguments": "{}"}}
    assert question([old_call, legacy], None) == "{}"
    assert question(conversation(1), 1) == "question 1 " + "q" * 40


def test_place_puts_the_recall_before_the_newest_step_never_last() -> None:
    recalled = Recalled({"role": "user", "content": "recalled"}, 1)
    made = recalled.message
    system: Message = {"role": "system", "content": "s"}
    summary: Message = {"role": "user", "content": "[Summary of the earlier conversation ...]"}
    user: Message = {"role": "user", "content": "q"}
    answer: Message = {"role": "assistant", "content": "a"}
    step1, step2 = tool_exchange(1, calls=2), tool_exchange(2)
    # a chat: before the latest user message
    assert place([system, summary, answer, user], recalled) == [system, summary, answer, made, user]
    assert place([system, summary, user], recalled) == [system, summary, made, user]
    # a tool loop: before the last call and the outputs answering it
    loop = [system, summary, user, *step1, *step2]
    assert place(loop, recalled) == [system, summary, user, *step1, made, *step2]
    # a user message right after tool outputs (one message on the Messages API): before their call
    said: Message = {"role": "user", "content": "and check the logs"}
    assert place([summary, user, *step1, said], recalled) == [summary, user, made, *step1, said]
    # an assistant message last (a prefill): before it
    assert place([summary, user, answer], recalled) == [summary, user, made, answer]
    assert place([system], recalled) == [made, system]
    assert place([], recalled) == [made]


def test_document_joins_the_messages_as_the_transcript_renders_them() -> None:
    messages = conversation(2)
    doc = document(messages, [1, 2, 4])
    assert doc.text.split("\n\n") == [
        "[2] user: question 1 " + "q" * 40,
        "[3] assistant: answer 1 " + "a" * 40,
        "[5] assistant: answer 2 " + "a" * 40,
    ]
    assert [doc.text[start:].split(":")[0] for start in doc.starts] == [
        "[2] user",
        "[3] assistant",
        "[5] assistant",
    ]


@pytest.mark.anyio
async def test_recall_drops_chunks_whose_exact_count_passes_the_budget() -> None:
    counter = CharCounter()  # counts a message's JSON: every quote costs two, chunks count one each
    messages: list[Message] = [{"role": "user", "content": '"kiwi" ' * 100}]
    header = counter.count_messages([{"role": "user", "content": HEADER}]) - counter.count_messages([])
    found = await recall(
        messages,
        [0],
        asked="kiwi",
        budget=header + 730,
        counter=counter,
        cache=DictCache(),
        ttl_seconds=60,
    )
    assert found is None


@pytest.mark.anyio
async def test_recall_rebuilds_a_damaged_index(counter: TiktokenCounter) -> None:
    messages = chat_with_a_paste()
    compressor, cache = make(counter)
    settings = make_settings(recall_tokens=1_500, reuse_tokens=10**6)
    first = await compressor.compress(messages, settings)
    [key] = cache.keys("summary-recall:")
    cache.values[key] = (b"damaged", cache.values[key][1])
    again = await compressor.compress(messages, settings)
    assert again.messages == first.messages and cache.values[key][0].startswith(b"RTRVIDX")


class KeyedCache(DictCache):
    """Remembers which keys were read."""

    def __init__(self) -> None:
        super().__init__()
        self.read: list[str] = []

    async def get(self, key: str) -> bytes | None:
        self.read.append(key)
        return await super().get(key)


@pytest.mark.anyio
async def test_recall_indexes_kept_in_memory_spare_the_cache_on_later_turns(counter: TiktokenCounter) -> None:
    messages = chat_with_a_paste()
    cache, memory = KeyedCache(), Lru[DocumentIndex](4)
    compressor = SummarizeOldTurns(
        counter=counter,  # type: ignore[arg-type]
        completer=ScriptedCompleter(),
        cache=cache,
        recall_memory=memory,
    )
    settings = make_settings(recall_tokens=1_500, reuse_tokens=10**6)
    first = await compressor.compress(messages, settings)
    recall_reads = [key for key in cache.read if key.startswith("summary-recall:")]
    assert first.recalled_chunks and len(recall_reads) == 1 and len(memory) == 1
    cache.read.clear()
    again = await compressor.compress(messages, settings)
    assert again.messages == first.messages
    assert cache.read and not [key for key in cache.read if key.startswith("summary-recall:")]


@pytest.mark.anyio
async def test_recall_skips_the_users_words_the_summary_quotes_whole(counter: TiktokenCounter) -> None:
    """Earlier questions worded like the latest one are pinned in the summary already: recalled again they
    would outrank the passage the latest one needs, so recall leaves them out of what it searches."""
    messages: list[Message] = [{"role": "system", "content": "You are helpful."}]
    for turn in range(10):
        text = prose(turn, 120)
        if turn == 2:
            text += " The cluster token is REF-72796."
        if turn in (5, 7):
            text = f"In the log I pasted at turn {turn - 4}, what was the payment key?"
        messages += [
            {"role": "user", "content": text},
            {"role": "assistant", "content": prose(50 + turn, 10)},
        ]
    messages.append({"role": "user", "content": "In the log I pasted at turn 2, what was the cluster token?"})
    compressor, _ = make(counter)
    result = await compressor.compress(messages, make_settings(recall_tokens=1_500, pinned_tokens=2_000))
    [summary] = [m for m in result.messages if str(m["content"]).startswith("[Summary")]
    assert "what was the payment key?" in summary["content"]  # pinned, verbatim
    [recall_message] = recalled_of(result.messages)
    assert "REF-72796" in recall_message["content"]
    assert "payment key" not in recall_message["content"]
