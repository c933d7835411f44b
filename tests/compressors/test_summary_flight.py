from __future__ import annotations

import asyncio

import pytest

from compressors.flight import single_flight
from compressors.summary import SummarizeOldTurns, SummaryFailed
from tests.compressors.test_summary_fakes import (
    CharCounter,
    DictCache,
    ScriptedCompleter,
    conversation,
    make_settings,
)


@pytest.mark.anyio
async def test_twenty_concurrent_requests_make_one_cheap_model_call() -> None:
    completer = ScriptedCompleter(delay=0.05)
    cache = DictCache()
    compressor = SummarizeOldTurns(counter=CharCounter(), completer=completer, cache=cache)
    messages = conversation(6)
    results = await asyncio.gather(*(compressor.compress(messages, make_settings()) for _ in range(20)))
    assert completer.calls == 1
    assert len({str(r.messages) for r in results}) == 1
    assert sorted(r.calls_made for r in results) == [0] * 19 + [1]
    assert sum(r.cache_hit for r in results) == 19
    assert cache.locks == {}


@pytest.mark.anyio
async def test_when_the_winner_fails_a_waiting_request_takes_over() -> None:
    completer = ScriptedCompleter(script=[RuntimeError("boom")], delay=0.02)
    compressor = SummarizeOldTurns(counter=CharCounter(), completer=completer, cache=DictCache())
    messages = conversation(6)
    outcomes = await asyncio.gather(
        *(compressor.compress(messages, make_settings()) for _ in range(20)), return_exceptions=True
    )
    failures = [o for o in outcomes if isinstance(o, BaseException)]
    assert len(failures) == 1 and isinstance(failures[0], SummaryFailed)
    assert completer.calls == 2


class LockedCache(DictCache):
    """A cache whose lock some other process holds for good."""

    async def acquire(self, key: str, *, ttl_seconds: float) -> bool:
        await asyncio.sleep(0)
        return False


@pytest.mark.anyio
async def test_a_waiting_request_proceeds_on_its_own_after_the_lock_ttl() -> None:
    completer = ScriptedCompleter()
    compressor = SummarizeOldTurns(counter=CharCounter(), completer=completer, cache=LockedCache())
    loop = asyncio.get_running_loop()
    started = loop.time()
    result = await compressor.compress(conversation(3), make_settings(lock_ttl=0.1, poll_interval=0.01))
    assert loop.time() - started >= 0.1
    assert (result.calls_made, result.cache_hit, completer.calls) == (1, False, 1)


@pytest.mark.anyio
async def test_single_flight_waiter_returns_what_the_holder_stores() -> None:
    cache = DictCache()
    assert await cache.acquire("lock", ttl_seconds=5)
    store: dict[str, str] = {}
    produced: list[str] = []

    async def lookup() -> str | None:
        return store.get("v")

    async def produce() -> str:
        produced.append("waiter")
        return "own"

    async def holder() -> None:
        await asyncio.sleep(0.03)
        store["v"] = "theirs"

    waiter = asyncio.create_task(
        single_flight(
            cache, lock="lock", lookup=lookup, produce=produce, lock_ttl=5, wait=5, poll_interval=0.005
        )
    )
    await holder()
    assert await waiter == ("theirs", False)
    assert produced == []


@pytest.mark.anyio
async def test_single_flight_holder_looks_again_after_taking_the_lock() -> None:
    cache = DictCache()
    answers = iter([None, "stored meanwhile"])

    async def lookup() -> str | None:
        return next(answers)

    async def produce() -> str:
        raise AssertionError("must not produce")

    assert await single_flight(
        cache, lock="l", lookup=lookup, produce=produce, lock_ttl=1, wait=1, poll_interval=0.01
    ) == ("stored meanwhile", False)
    assert cache.locks == {}


@pytest.mark.anyio
async def test_single_flight_returns_a_cached_value_without_touching_the_lock() -> None:
    cache = LockedCache()

    async def lookup() -> str | None:
        return "cached"

    async def produce() -> str:
        raise AssertionError("must not produce")

    assert await single_flight(
        cache, lock="l", lookup=lookup, produce=produce, lock_ttl=1, wait=1, poll_interval=0.01
    ) == ("cached", False)
