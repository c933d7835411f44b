"""Anthropic's explicit cache in the gateway's conversation model: only the prefixes a request marked
with ``cache_control`` are cached, each for its TTL, and found again from a breakpoint at most 20 elements
later; the breakpoints survive the conversation state's round trip through Redis's JSON."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.base.counterfactual_cache import Basis, CounterfactualCache
from gateway.config.schema.root import PromptCacheConfig
from gateway.conversations.counterfactual import cacheable, cached_prefix, from_conversation, held_tokens
from gateway.conversations.facts import cache_facts
from gateway.conversations.fingerprint import Chain
from gateway.conversations.state import ConversationState, Seen
from gateway.conversations.store import Recalled
from gateway.conversations.trace import Prompt, retention_of
from gateway.core.front import CHAT
from gateway.fronts.messages.front import MESSAGES
from tests.factories import shared_counter

MODEL = "claude-sonnet-4-5"
CACHE = PromptCacheConfig(granularity=1)
NOW = 2_000_000_000
FIVE = {"type": "ephemeral"}
HOUR = {"type": "ephemeral", "ttl": "1h"}
TEXT = "The quick brown fox jumps over the lazy dog. " * 60
"""About 600 tokens a turn."""


def session(
    turns: int, *, last: dict[str, Any] | None = FIVE, system: dict[str, Any] | None = HOUR
) -> dict[str, Any]:
    """A conversation of ``turns`` user and assistant turns, a breakpoint on the system prompt (``system``)
    and on the last message (``last``), as Claude Code places them."""
    messages: list[dict[str, Any]] = []
    for turn in range(turns):
        messages.append({"role": "user", "content": [{"type": "text", "text": f"{turn}: {TEXT}"}]})
        messages.append({"role": "assistant", "content": [{"type": "text", "text": f"answer {turn}"}]})
    messages.append({"role": "user", "content": [{"type": "text", "text": "and now?"}]})
    if last is not None:
        messages[-1]["content"][0]["cache_control"] = last
    block: dict[str, Any] = {"type": "text", "text": "You are a coding agent. " + TEXT * 2}
    if system is not None:
        block["cache_control"] = system
    return {"model": MODEL, "max_tokens": 100, "system": [block], "messages": messages}


def chain(body: dict[str, Any]) -> Chain:
    return Prompt(MESSAGES, body, MESSAGES.count(shared_counter(), MODEL, body)).chain()


def seen(body: dict[str, Any], *, ago_s: float) -> Seen:
    found = chain(body)
    return Seen(MODEL, NOW - int(ago_s * 1000), retention_of(found, CACHE.retention_seconds), found)


def test_messages_chain_knows_its_breakpoints_by_element() -> None:
    body = session(2)
    body["tools"] = [{"name": "Read", "input_schema": {}, "cache_control": FIVE}]
    found = chain(body)
    assert found.breakpoints == ((0, 300), (1, 3600), (len(found) - 1, 300))
    assert len(found) == 1 + 1 + 5  # tools, system, five messages
    chat = {"messages": [{"role": "user", "content": "x"}]}
    assert CHAT.breakpoints(chat, CHAT.messages(chat)) is None
    assert MESSAGES.breakpoints({"messages": []}, []) is None


def test_messages_next_turn_reads_the_previous_prefix_up_to_its_last_breakpoint_exactly() -> None:
    before, after = session(3), session(4)
    previous = seen(before, ago_s=30)
    guess = from_conversation(previous, chain(after), model=MODEL, cache=CACHE, now_ms=NOW)
    prefix = previous.chain.tokens[-2]  # the previous request up to its last message, which changed
    current = chain(after)
    writes = current.tokens[-1] - previous.chain.tokens[1]  # up to its breakpoint on its last message
    assert guess == CounterfactualCache(previous.chain.tokens[1], Basis.CONVERSATION, writes)
    # the breakpoint on "and now?" is gone in the next turn (that message changed): what stays cached is
    # the system prompt, marked for an hour; the growing history needs a breakpoint inside what repeats
    assert previous.chain.tokens[1] < prefix


def test_messages_breakpoint_on_history_that_repeats_is_read_next_turn() -> None:
    before, after = session(3, last=None), session(4, last=None)
    before["messages"][-2]["content"][0]["cache_control"] = FIVE  # the last answer, repeated next turn
    after["messages"][-1]["content"][0]["cache_control"] = FIVE
    previous = seen(before, ago_s=30)
    current = chain(after)
    marked = len(previous.chain) - 2  # the element of the last answer
    assert cached_prefix(previous, current, cache=CACHE, now_ms=NOW) == previous.chain.tokens[marked]
    assert previous.chain.tokens[marked] % 128  # exact, not in 128-token steps


def test_messages_without_breakpoints_nothing_is_cached_however_long_the_shared_prefix() -> None:
    before, after = session(3, last=None, system=None), session(4, last=None, system=None)
    previous = seen(before, ago_s=30)
    assert cached_prefix(previous, chain(after), cache=CACHE, now_ms=NOW) == 0
    assert previous.chain.shared_tokens(chain(after)) > 1024  # an implicit cache would have served it


def test_messages_each_breakpoint_lasts_its_own_ttl() -> None:
    before, after = session(3, last=None), session(4, last=None)
    before["messages"][-2]["content"][0]["cache_control"] = FIVE
    after["messages"][-1]["content"][0]["cache_control"] = FIVE
    previous = seen(before, ago_s=400)  # the 5-minute breakpoint is gone, the system's hour is not
    assert previous.retention_seconds == 3600 and previous.warm_at(NOW)
    guess = from_conversation(previous, chain(after), model=MODEL, cache=CACHE, now_ms=NOW)
    assert guess.tokens == previous.chain.tokens[1] and guess.basis is Basis.CONVERSATION
    later = seen(before, ago_s=3600)
    assert from_conversation(later, chain(after), model=MODEL, cache=CACHE, now_ms=NOW).basis is (
        Basis.CONVERSATION_COLD
    )


def test_messages_a_breakpoint_too_far_after_the_cached_one_finds_nothing() -> None:
    before = session(3, system=None, last=None)
    before["messages"][-2]["content"][0]["cache_control"] = FIVE
    after = session(16, system=None, last=FIVE)  # the next breakpoint 26 elements further
    previous = seen(before, ago_s=10)
    assert cached_prefix(previous, chain(after), cache=CACHE, now_ms=NOW) == 0
    near = session(10, system=None, last=FIVE)  # 12 elements further: within the lookback
    assert cached_prefix(previous, chain(near), cache=CACHE, now_ms=NOW) > 0


def test_messages_a_prefix_below_the_minimum_is_never_cached() -> None:
    body = session(3)
    previous = seen(body, ago_s=10)
    system_tokens = previous.chain.tokens[1]
    strict = PromptCacheConfig(granularity=1, min_prefix_tokens=system_tokens + 1)
    assert cached_prefix(previous, chain(session(4)), cache=strict, now_ms=NOW) == 0
    assert held_tokens(previous, cache=strict, now_ms=NOW) == previous.chain.tokens[-1]


def test_messages_held_tokens_of_what_was_sent_end_at_its_last_warm_breakpoint() -> None:
    sent = seen(session(3), ago_s=400)
    assert held_tokens(sent, cache=CACHE, now_ms=NOW) == sent.chain.tokens[1]  # only the hour is left
    fresh = seen(session(3), ago_s=10)
    assert held_tokens(fresh, cache=CACHE, now_ms=NOW) == fresh.chain.tokens[-1]


def test_messages_cache_facts_of_a_compacted_conversation_use_the_breakpoints_of_what_was_sent() -> None:
    client, sent = seen(session(6), ago_s=10), seen(session(2), ago_s=10)
    state = ConversationState(client=client, sent=sent, compacted=True)
    facts = cache_facts(Recalled(state, None), chain(session(7)), model=MODEL, cache=CACHE, now_ms=NOW)
    assert facts is not None and facts.compacted and facts.cached_tokens == sent.chain.tokens[-1]


def test_messages_breakpoints_survive_the_state_json_and_older_states_read_as_implicit() -> None:
    client = seen(session(2), ago_s=1)
    state = ConversationState(client=client)
    back = ConversationState.from_json(state.to_json())
    assert back is not None and back.client.chain == client.chain and back.client.chain.breakpoints
    implicit = Seen("gpt-5.4", NOW, 300.0, Chain(client.chain.hashes, client.chain.tokens))
    old = ConversationState.from_json(ConversationState(client=implicit).to_json())
    assert old is not None and old.client.chain.breakpoints is None
    assert cached_prefix(old.client, chain(session(3)), cache=CACHE, now_ms=NOW) == cacheable(
        old.client.chain.shared_tokens(chain(session(3))), CACHE
    )


@pytest.mark.parametrize("points", [[[99, 300]], [[0]], "x"])
def test_messages_state_with_broken_breakpoints_is_unreadable(points: Any) -> None:
    client = seen(session(1), ago_s=1)
    raw = (
        ConversationState(client=client)
        .to_json()
        .replace(b'"b":[[', b'"b":' + repr(points).encode() + b',"_":[[')
    )
    assert ConversationState.from_json(raw.replace(b"'", b'"')) is None
