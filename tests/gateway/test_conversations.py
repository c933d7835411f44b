"""Conversation cache state: fingerprints, the counterfactual estimate, the store against a real Redis."""

from __future__ import annotations

import time
from decimal import Decimal
from typing import Any

import pytest
import redis.asyncio as aioredis

from gateway.base.counterfactual_cache import Basis, CounterfactualCache
from gateway.base.types import Usage
from gateway.config.schema.root import PromptCacheConfig
from gateway.conversations.counterfactual import cacheable, from_conversation, from_share
from gateway.conversations.facts import cache_facts
from gateway.conversations.fingerprint import Chain, anchor_of, chain_of
from gateway.conversations.state import ConversationState, Seen, carried, mean_growth
from gateway.conversations.store import SHARE_MIN_INPUT, ConversationStore, Recalled, ShareUpdate
from gateway.money.pricing import price
from policies.facts import Strategy
from tests.gateway.test_pricing import GPT_5_4

CACHE = PromptCacheConfig()


def conversation(turns: int, *, system: str = "You are helpful.") -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": system}]
    for turn in range(turns):
        messages.append({"role": "user", "content": f"question {turn}"})
        messages.append({"role": "assistant", "content": f"answer {turn}"})
    return messages


def chain(messages: list[dict[str, Any]], *, per_message: int = 1000, tools: Any = None) -> Chain:
    return chain_of(tools, messages, tools_tokens=0, per_message=[per_message] * len(messages))


def test_fingerprint_a_grown_conversation_shares_its_whole_previous_prompt() -> None:
    before, after = chain(conversation(3)), chain(conversation(4))
    assert before.shared_tokens(after) == 7 * 1000
    assert after.shared_tokens(before) == 7 * 1000


def test_fingerprint_a_rewritten_prefix_shares_only_what_precedes_the_change() -> None:
    original = conversation(4)
    summarised = [original[0], {"role": "user", "content": "summary of turns 0-2"}, *original[7:]]
    assert chain(original).shared_tokens(chain(summarised)) == 1000  # the system message only


def test_fingerprint_a_breakpoint_moved_on_to_the_next_turn_changes_no_prefix() -> None:
    """Claude Code marks the last message with ``cache_control`` and moves the mark on the next turn:
    the marked message is the same message, so the whole previous prompt is shared."""
    marked = {"type": "ephemeral"}
    first = [
        {"role": "user", "content": [{"type": "text", "text": "one", "cache_control": marked}]},
    ]
    second = [
        {"role": "user", "content": [{"type": "text", "text": "one"}]},
        {"role": "assistant", "content": "two"},
        {"role": "user", "content": [{"type": "text", "text": "three", "cache_control": marked}]},
    ]
    tools = [{"name": "read", "input_schema": {}, "cache_control": marked}]
    assert (
        chain(first, tools=tools).shared_tokens(chain(second, tools=[{"name": "read", "input_schema": {}}]))
        == 1000
    )
    other = [{"role": "user", "content": [{"type": "text", "text": "ONE", "cache_control": marked}]}]
    assert chain(first).shared_tokens(chain(other)) == 0


def test_fingerprint_other_tools_share_nothing() -> None:
    messages = conversation(2)
    with_tools = chain(messages, tools=[{"type": "function", "function": {"name": "f"}}])
    assert chain(messages).shared_tokens(with_tools) == 0


def test_fingerprint_names_a_conversation_by_its_opening_and_keeps_it_as_it_grows() -> None:
    first, later = conversation(1), conversation(6)
    assert anchor_of(chain(first), first) == anchor_of(chain(later), later)
    other = conversation(6)
    other[1] = {"role": "user", "content": "a different first question"}
    assert anchor_of(chain(other), other) != anchor_of(chain(later), later)
    assert anchor_of(chain(first), first, cache_key="session-1") == anchor_of(
        chain(other), other, cache_key="session-1"
    )


@pytest.mark.parametrize(
    ("tokens", "expected"), [(1023, 0), (1024, 1024), (1100, 1024), (1151, 1024), (1152, 1152), (0, 0)]
)
def test_counterfactual_cacheable_rounds_down_to_the_granularity_and_needs_the_minimum(
    tokens: int, expected: int
) -> None:
    assert cacheable(tokens, CACHE) == expected


def seen(messages: list[dict[str, Any]], *, at_ms: int, model: str = "gpt-5.4") -> Seen:
    return Seen(model, at_ms, CACHE.retention_seconds, chain(messages, per_message=1500))


def test_counterfactual_warm_conversation_shares_the_previous_request() -> None:
    now = 1_000_000_000
    previous = seen(conversation(3), at_ms=now - 60_000)
    guess = from_conversation(
        previous, chain(conversation(4), per_message=1500), model="gpt-5.4", cache=CACHE, now_ms=now
    )
    assert guess == CounterfactualCache(cacheable(7 * 1500, CACHE), Basis.CONVERSATION)
    assert not guess.estimated


@pytest.mark.parametrize(("idle_ms", "model"), [(300_000, "gpt-5.4"), (10, "gpt-5.2")])
def test_counterfactual_cold_or_other_model_had_nothing_cached(idle_ms: int, model: str) -> None:
    now = 1_000_000_000
    previous = seen(conversation(3), at_ms=now - idle_ms, model=model)
    guess = from_conversation(previous, chain(conversation(4)), model="gpt-5.4", cache=CACHE, now_ms=now)
    assert guess == CounterfactualCache(0, Basis.CONVERSATION_COLD)


def test_counterfactual_unknown_conversation_takes_the_tenant_share_and_is_estimated() -> None:
    assert from_share(0.9, 200_000, CACHE) == CounterfactualCache(180_000 - 180_000 % 128, Basis.TENANT_SHARE)
    assert from_share(0.9, 200_000, CACHE).estimated
    assert from_share(None, 200_000, CACHE) == CounterfactualCache(0, Basis.NONE)


def test_state_round_trips_and_unreadable_values_are_none() -> None:
    state = ConversationState(client=seen(conversation(2), at_ms=5), sent=seen(conversation(1), at_ms=5))
    assert ConversationState.from_json(state.to_json()) == state
    assert ConversationState.from_json(b"{not json") is None
    assert ConversationState.from_json(b'{"c": {"m": "x"}}') is None


def test_state_keeps_the_strategy_and_counts_its_switches() -> None:
    client = seen(conversation(2), at_ms=5)
    state = ConversationState(client=client, strategy=Strategy.RETRIEVE, switches=1)
    assert ConversationState.from_json(state.to_json()) == state
    assert carried(None, Strategy.COMPRESS) == (Strategy.COMPRESS, 0)
    assert carried(state, None) == (Strategy.RETRIEVE, 1)  # forwarded: the strategy is kept
    assert carried(state, Strategy.RETRIEVE) == (Strategy.RETRIEVE, 1)
    assert carried(state, Strategy.COMPRESS) == (Strategy.COMPRESS, 2)
    assert carried(ConversationState(client=client), Strategy.COMPRESS) == (Strategy.COMPRESS, 0)


def test_pricing_cache_writes_cost_the_write_multiplier() -> None:
    usage = Usage(input_tokens=10_000, cached_input_tokens=2_000, output_tokens=0, cache_write_tokens=4_000)
    plain = price(usage, GPT_5_4).total_nanos
    billed = price(usage, GPT_5_4, write_multiplier=Decimal("1.25")).total_nanos
    assert plain == 8_000 * 2_500 + 2_000 * 250
    assert billed == 4_000 * 2_500 + 4_000 * 3_125 + 2_000 * 250
    parts = price(usage, GPT_5_4, write_multiplier=Decimal("1.25")).parts
    assert parts == (4_000 * 2_500, 2_000 * 250, 4_000 * 3_125, 0)  # the export's rows, by unit
    over = Usage(input_tokens=300_000, output_tokens=0, cache_write_tokens=100_000)
    tiered = price(over, GPT_5_4, write_multiplier=Decimal("1.25"))
    assert tiered.total_nanos == (
        200_000 * 5_000 + 100_000 * 6_250
    )  # whole-request tier: writes at 1.25 x the doubled input price
    assert tiered.parts == (200_000 * 5_000, 0, 100_000 * 6_250, 0)


@pytest.mark.anyio
async def test_store_keeps_state_and_the_tenant_share(redis_client: aioredis.Redis, tenant_name: str) -> None:
    store = ConversationStore(redis_client, prefix="gwtest")
    state = ConversationState(client=seen(conversation(2), at_ms=int(time.time() * 1000)))
    share = ShareUpdate("gpt-5.4", SHARE_MIN_INPUT, SHARE_MIN_INPUT * 9 // 10)
    assert await store.remember(tenant_name, "p1", state, ttl_seconds=60, now_ms=1)
    await store.add_share(tenant_name, share)
    recalled = await store.recall(tenant_name, "p1", "gpt-5.4")
    assert recalled.available and recalled.state == state and recalled.share == pytest.approx(0.9)
    unknown = await store.recall(tenant_name, "p2", "gpt-5.2")
    assert unknown.available and unknown.state is None and unknown.share is None
    assert 0 < await redis_client.pttl(f"gwtest:{{{tenant_name}}}:conv:p1") <= 60_000


@pytest.mark.anyio
async def test_store_adds_up_what_pre_compression_spent_per_conversation(
    redis_client: aioredis.Redis, tenant_name: str
) -> None:
    store = ConversationStore(redis_client, prefix="gwtest")
    assert (await store.recall(tenant_name, "p1", "gpt-5.4")).precompressed_nanos == 0
    await store.add_precompressed(tenant_name, "p1", 60_000_000)
    await store.add_precompressed(tenant_name, "p1", 15_000_000)
    recalled = await store.recall(tenant_name, "p1", "gpt-5.4")
    assert recalled.precompressed_nanos == 75_000_000
    assert (await store.recall(tenant_name, "p2", "gpt-5.4")).precompressed_nanos == 0
    chain_ = chain(conversation(2))
    state = ConversationState(client=Seen("gpt-5.4", 1, 3600.0, chain_))
    facts = cache_facts(
        Recalled(state, None, precompressed_nanos=75_000_000), chain_, model="gpt-5.4", cache=CACHE, now_ms=2
    )
    assert facts is not None and facts.precompressed_usd == pytest.approx(0.075)


def test_state_averages_the_growth_per_request() -> None:
    def at(tokens: int, model: str = "gpt-5.4") -> Seen:
        return Seen(model, 1, 3600.0, Chain(b"\0" * 8, (tokens,)))

    first = ConversationState(client=at(40_000))
    assert mean_growth(None, at(80_000)) is None
    assert mean_growth(first, at(80_000)) == 40_000
    grown = ConversationState(client=at(80_000), mean_growth=40_000)
    assert mean_growth(grown, at(80_500)) == 20_250  # a small user turn weighs half
    assert mean_growth(grown, at(60_000)) == 40_000  # shrunk (a branch): unchanged
    assert mean_growth(grown, at(90_000, model="gpt-5.5")) is None
    assert ConversationState.from_json(grown.to_json()) == grown


def test_a_request_that_does_not_extend_a_cut_conversation_is_a_branch() -> None:
    before = chain(conversation(6))
    state = ConversationState(
        client=Seen("gpt-5.4", 1, 3600.0, before), compacted=False, strategy=Strategy.COMPRESS
    )
    recalled = Recalled(state, None)

    def facts_of(messages: list[dict[str, Any]], *, cut: bool = True) -> Any:
        read = recalled if cut else Recalled(ConversationState(client=state.client), None)
        return cache_facts(read, chain(messages), model="gpt-5.4", cache=CACHE, now_ms=2)

    edited = [*conversation(4), {"role": "user", "content": "an edited question"}]
    assert facts_of(edited).branched
    assert not facts_of(conversation(8)).branched  # grown: the same history and more
    assert not facts_of(edited, cut=False).branched  # never cut: forwarding kept its cache


@pytest.mark.anyio
async def test_store_is_bounded_per_tenant(redis_client: aioredis.Redis, tenant_name: str) -> None:
    store = ConversationStore(redis_client, prefix="gwtest", max_per_tenant=lambda: 3)
    state = ConversationState(client=seen(conversation(1), at_ms=1))
    for number in range(5):
        await store.remember(tenant_name, f"c{number}", state, ttl_seconds=60, now_ms=number)
    kept = [(await store.recall(tenant_name, f"c{n}", "gpt-5.4")).state is not None for n in range(5)]
    assert kept == [False, False, True, True, True]
    assert await redis_client.zcard(f"gwtest:{{{tenant_name}}}:convs") == 3


@pytest.mark.anyio
async def test_store_with_redis_down_says_unknown(dead_redis: aioredis.Redis) -> None:
    store = ConversationStore(dead_redis)
    recalled = await store.recall("acme", "p1", "gpt-5.4")
    assert not recalled.available and recalled.state is None
    state = ConversationState(client=seen(conversation(1), at_ms=1))
    assert not await store.remember("acme", "p1", state, ttl_seconds=1, now_ms=1)
