"""Recall: excerpts of the summarised turns that the latest request asks about, in one message placed
before the newest step.

A summary loses details (a number in a 20K-token tool output, a line of a pasted log) that a later
question may need, and so does an excerpt of a tool output kept in the recent part. So the messages the
summaries replace and the excerpted tool outputs, in full, are rendered as the cheap model reads them
(``transcript.render_message``, joined as ``render_block`` joins them) into one document, cut into
chunks of 500-800 tokens and indexed with BM25 (``compressors.retrieval``: chunking, index, ranking).
The question is the latest user message's text (its last ``QUESTION_MAX_CHARS`` characters) plus the
arguments of the tool calls of the last assistant message after it (an agent's latest step names
what it looks for). The best chunks that fit ``recall_tokens`` (and what the request's limit leaves)
are sent in document order, neighbours merged, each marked with the positions of the messages it
comes from, in one message opened by ``RECALL_OPENING`` and framed as reference material: not a
message from the user, asking for nothing. No chunk scoring above zero: no recall message.

Where it goes (``place``): never last, and never after the message the model is to answer. An agent
that takes the last user message for its instruction read a recall sent at the very end, after the
tool output it was working on, as a new request, and started its task over. So the recall goes right
before the newest step: the latest user message, or the last assistant message with tool calls and
the outputs answering it. The model then reads the recall, then what it answers, as it always did.
When that step opens with a user message right after tool outputs, the recall goes before the tool
call those outputs answer: on the Messages API the outputs and the user's text are one message, which
a message of the gateway's cannot split.

It is a ``user`` message: the role every upstream accepts anywhere (Anthropic merges it with the user
message next to it, as it does a client's own reminders), and the one with the least authority (it
quotes old tool outputs, which must not gain a system or developer message's weight).

The trade-off is the provider's prompt cache. The recall depends on the question, so it changes every
request, and everything after it is re-sent uncached. Placed with the summary, before the recent
turns, it would re-send the whole verbatim part uncached on every request: that part grows, turn after
turn, while a compaction is reused up to ``reuse_tokens`` (under the example policy for a 272K cliff,
from about 15K tokens to 195K), and would cost more than forwarding the whole request from the cache.
At the very end it cost nothing but itself, and posed as the user. Before the newest step it costs,
on top of itself, the step before (what the previous request added, sent after that request's
recall), once: a user message, or one tool call with its outputs. The summary and everything up to
the previous step stay the provider's cached prefix (on the Messages API the gateway puts a breakpoint
there). No placement that is not last costs less: whatever follows the recall in one request and
precedes it in the next is re-sent. Where steps are large the price shows: on the savings benchmark
(10K-token user messages, tool outputs of 10-25K) the gateway's bill went from 51% to 57% of
forwarding on the long chat and from 52% to 60% on the tool loop.

The index is cached in the Cache under a hash of the document's bytes and the encoding (built off the
event loop when missing, stored with the summary's ``cache_ttl``), so the turns that reuse a summary
index its span once.
"""

from __future__ import annotations

import asyncio
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from compressors.lru import Lru
from compressors.protocols import Cache, Message, TokenCounter
from compressors.retrieval.codec import decode_index, encode_index
from compressors.retrieval.index import DocumentIndex, build_index, index_key
from compressors.retrieval.ranking import Scores, order_by_score, phrase_scores
from compressors.retrieval.settings import RetrievalSettings
from compressors.summary.assembly import RECALL_OPENING
from compressors.summary.keys import recall_key
from compressors.summary.selection import ANSWER_ROLES, group_blocks
from compressors.summary.transcript import call_arguments, content_text, render_message

CHUNKS = RetrievalSettings(chunk_min=500, chunk_max=800, overlap=0)
QUESTION_MAX_CHARS = 4_000
PHRASE_MAX_CHARS = 200
"""Of the question, the end whose word pairs also score as phrases (each phrase is a search of the
whole summarised span: a long pasted question would cost a search per pair)."""
MIN_LIFT = 2.0
SINGLED_OUT = 3
"""A chunk is recalled only when the question singles it out: it scores at least ``MIN_LIFT`` times the
median of the chunks that match the question at all, unless fewer than ``SINGLED_OUT`` match (a rare
name, a number: those few are singled out already). A question that matches many chunks about as well
(a long message of prose, whose words are everywhere; an agent's routine call naming the same kind of
path as every call before) singles out nothing and gets no recall: an excerpt the question does not need
costs its own tokens and re-sends what follows it uncached."""
RUN_MARKER_TOKENS = 12
"""Estimated tokens of one ``[from messages …]`` line and the blank line before it."""
HEADER = (
    f"{RECALL_OPENING} from the summarised part of the conversation, as reference for what follows. "
    "This is not a message from the user and asks for nothing: the conversation goes on after it. "
    "They are quoted in their original order, each marked with the messages it comes from; the text "
    "between them was left out.]"
)


@dataclass(frozen=True, slots=True)
class Document:
    """The summarised messages as one text; message ``numbers[i]`` starts at ``starts[i]``."""

    text: str
    starts: list[int]
    numbers: list[int]


@dataclass(frozen=True, slots=True)
class Recalled:
    message: Message
    chunks: int


def document(messages: Sequence[Message], replaced: Sequence[int]) -> Document:
    pieces = [render_message(messages[i], number=i + 1) for i in replaced]
    starts, offset = [], 0
    for piece in pieces:
        starts.append(offset)
        offset += len(piece) + 2
    return Document("\n\n".join(pieces), starts, list(replaced))


def question(messages: Sequence[Message], last_user: int | None) -> str:
    """The latest user message's text and the arguments of the last assistant tool calls after it (of
    the last ones anywhere when there is no user message)."""
    asked = "" if last_user is None else content_text(messages[last_user].get("content"))
    since = messages if last_user is None else messages[last_user + 1 :]
    calls = next((m for m in reversed(since) if m.get("role") == "assistant" and call_arguments(m)), None)
    arguments = [] if calls is None else call_arguments(calls)
    return "\n".join([asked[-QUESTION_MAX_CHARS:], *arguments]).strip()


async def recall(
    messages: Sequence[Message],
    replaced: Sequence[int],
    *,
    asked: str,
    budget: int,
    counter: TokenCounter,
    cache: Cache,
    ttl_seconds: int,
    memory: Lru[DocumentIndex] | None = None,
) -> Recalled | None:
    """The recall message for ``asked`` over the messages at ``replaced``, within ``budget`` tokens.
    ``memory``: indexes this process keeps (a conversation reusing its summary recalls from the same
    span turn after turn: neither Redis nor decoding are needed again)."""
    if budget <= 0 or not asked or not replaced:
        return None
    doc, data, key = await asyncio.to_thread(_keyed, messages, replaced, counter)
    index = memory.get(key) if memory is not None else None
    if index is None:
        index = _decoded(await cache.get(key))
        if index is None:
            index = await asyncio.to_thread(build_index, doc.text, counter, CHUNKS)
            await cache.set(key, encode_index(index), ttl_seconds=ttl_seconds)
        if memory is not None:
            memory.put(key, index)
    return await asyncio.to_thread(_select, doc, data, index, asked, budget, counter)


def _keyed(
    messages: Sequence[Message], replaced: Sequence[int], counter: TokenCounter
) -> tuple[Document, bytes, str]:
    """The document of the replaced messages, its bytes and its index's cache key (one worker hop)."""
    doc = document(messages, replaced)
    data = doc.text.encode("utf-8", "surrogatepass")
    return doc, data, recall_key(index_key(data, counter, CHUNKS))


def place(messages: list[Message], recalled: Recalled) -> list[Message]:
    """``messages`` with the recall right before the newest step (see the module docstring)."""
    at = newest_step(messages)
    return [*messages[:at], recalled.message, *messages[at:]]


def newest_step(messages: Sequence[Message]) -> int:
    """Where the newest step starts: its last block, or the block before when that is a user message
    right after tool outputs (one message on the Messages API); 0 without a block."""
    blocks = group_blocks(messages)
    if not blocks:
        return 0
    at = blocks[-1].indices[0]
    before = messages[at - 1].get("role") if at > 0 else None
    if len(blocks) > 1 and messages[at].get("role") == "user" and before in ANSWER_ROLES:
        at = blocks[-2].indices[0]
    return at


def _decoded(raw: bytes | None) -> DocumentIndex | None:
    if raw is None:
        return None
    try:
        return decode_index(raw)
    except ValueError:
        return None  # damaged or of another format: built again and overwritten


def _select(
    doc: Document, data: bytes, index: DocumentIndex, asked: str, budget: int, counter: TokenCounter
) -> Recalled | None:
    chunks, lexical = index.chunks, index.lexical
    folded = data.lower()
    tail = asked[-PHRASE_MAX_CHARS:]

    def scored(text: str) -> Scores:
        return phrase_scores(
            lexical.scores(text),
            tail,
            lexical,
            folded=folded,
            starts=chunks.byte_starts,
            ends=chunks.byte_ends,
        )

    candidates = singled_out(scored(asked))
    sizes = (chunks.token_ends - chunks.token_starts).tolist()
    primer = counter.count_messages([])
    room = budget - (counter.count_messages([_message(doc, index, [])]) - primer)
    chosen: list[int] = []
    for number in dict.fromkeys(candidates):
        cost = sizes[number] + RUN_MARKER_TOKENS
        if cost <= room:
            chosen.append(number)
            room -= cost
    while chosen:
        message = _message(doc, index, chosen)
        if counter.count_messages([message]) - primer <= budget:
            return Recalled(message, len(chosen))
        chosen.pop()  # the lowest-ranked one
    return None


def singled_out(scores: Scores) -> list[int]:
    """The chunks ``scores`` single out, best first (``MIN_LIFT``, ``SINGLED_OUT``)."""
    positive = scores[scores > 0]
    floor = float(np.median(positive)) * MIN_LIFT if len(positive) >= SINGLED_OUT else 0.0
    order = order_by_score(scores)
    return [int(number) for number in order if scores[number] >= floor]


def _message(doc: Document, index: DocumentIndex, chosen: Sequence[int]) -> Message:
    chunks = index.chunks
    parts = [HEADER]
    for first, last in _runs(sorted(chosen)):
        start, end = int(chunks.char_starts[first]), int(chunks.char_ends[last])
        parts.append(f"{_origin(doc, start, end)}\n{doc.text[start:end].strip()}")
    return {"role": "user", "content": "\n\n".join(parts)}


def _runs(numbers: Sequence[int]) -> list[tuple[int, int]]:
    runs: list[tuple[int, int]] = []
    for number in numbers:
        if runs and runs[-1][1] == number - 1:
            runs[-1] = (runs[-1][0], number)
        else:
            runs.append((number, number))
    return runs


def _origin(doc: Document, start: int, end: int) -> str:
    """Where ``text[start:end]`` comes from: ``[from message 12]`` or ``[from messages 12-14]`` (with
    an en dash)."""
    first = doc.numbers[max(bisect_right(doc.starts, start) - 1, 0)] + 1
    last = doc.numbers[max(bisect_right(doc.starts, max(end - 1, start)) - 1, 0)] + 1
    span = f"message {first}" if first == last else f"messages {first}\u2013{last}"
    return f"[from {span}]"
