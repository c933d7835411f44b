"""The ledger seen from outside the gateway process: requests sent with the openai SDK, then their cost
events read back from Redis with ``LedgerReader`` and the ledger's keys, polled rather than waited for."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import openai
import redis.asyncio as aioredis
from prometheus_client.parser import text_string_to_metric_families

from gateway.ledger import CostEvent, LedgerKeys, LedgerReader, Period
from gateway.ledger.period import day_of, month_of
from gateway.ledger.spool import REJECTED, SUFFIX
from gateway.ledger.summary import Counters, read_counters

KEYS = LedgerKeys()


@dataclass(frozen=True, slots=True)
class Outcome:
    """One request as the client saw it."""

    request_id: str
    status: int
    error: str | None = None
    """The SDK's exception class name, when the gateway answered with an error."""
    code: str | None = None
    prompt_tokens: int | None = None
    """``x-gateway-prompt-tokens``."""


def around(started: float, *, margin_ms: int = 60_000) -> Period:
    """From a little before ``started`` (epoch seconds) to a little after now."""
    return Period(int(started * 1000) - margin_ms, int(time.time() * 1000) + margin_ms)


async def chat(client: openai.AsyncOpenAI, messages: list[Any], *, max_completion_tokens: int) -> Outcome:
    try:
        raw = await client.chat.completions.with_raw_response.create(
            model="gpt-5.4", messages=messages, max_completion_tokens=max_completion_tokens
        )
    except openai.APIStatusError as exc:
        return Outcome(
            exc.response.headers.get("x-gateway-request-id", ""),
            exc.status_code,
            type(exc).__name__,
            exc.code,
        )
    prompt = raw.headers.get("x-gateway-prompt-tokens")
    return Outcome(
        raw.headers["x-gateway-request-id"],
        raw.http_response.status_code,
        prompt_tokens=int(prompt) if prompt is not None else None,
    )


async def send_many(
    client: openai.AsyncOpenAI,
    messages: list[Any],
    *,
    count: int,
    concurrency: int,
    outcomes: list[Outcome],
    max_completion_tokens: int = 64,
) -> None:
    """``count`` requests, ``concurrency`` at a time; each outcome is appended as it arrives (progress)."""
    gate = asyncio.Semaphore(concurrency)

    async def one() -> None:
        async with gate:
            outcomes.append(await chat(client, messages, max_completion_tokens=max_completion_tokens))

    await asyncio.gather(*(one() for _ in range(count)))


async def wait_until(check: Callable[[], Awaitable[str | None]], *, timeout: float = 60.0) -> None:
    """Poll ``check`` (``None`` when satisfied, else what is still missing) until it is satisfied."""
    deadline = time.monotonic() + timeout
    missing: str | None = "never checked"
    while time.monotonic() < deadline:
        try:
            async with asyncio.timeout(max(0.1, deadline - time.monotonic())):
                missing = await check()
        except TimeoutError:
            missing = f"the check itself did not answer ({missing})"
            break
        if missing is None:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"not reached within {timeout} s: {missing}")


async def missing_ids(redis: aioredis.Redis, tenant: str, ids: Sequence[str], period: Period) -> set[str]:
    """The ids the ledger has not applied yet (its dedup marker sets, one per month)."""
    missing = set(ids)
    for month in period.months():
        if not missing:
            break
        wanted = sorted(missing)
        flags = await redis.smismember(KEYS.seen(tenant, month), wanted)
        missing -= {request_id for request_id, flag in zip(wanted, flags, strict=True) if flag}
    return missing


def spool_segments(spool_dir: Path) -> list[Path]:
    """Segment files still waiting for replay."""
    if not spool_dir.exists():
        return []
    return [path for path in spool_dir.glob(f"*{SUFFIX}") if path.name != REJECTED]


async def settle(
    redis: aioredis.Redis,
    tenant: str,
    ids: Sequence[str],
    period: Period,
    *,
    spool_dir: Path | None = None,
    timeout: float = 60.0,
) -> None:
    """Wait until every id is applied, no budget hold is open and the spool (if given) is empty."""

    async def check() -> str | None:
        missing = await missing_ids(redis, tenant, ids, period)
        if missing:
            return f"{len(missing)} of {len(ids)} events not in Redis, e.g. {sorted(missing)[:3]}"
        held = await redis.hget(KEYS.holds(tenant), "total")
        if held is not None and int(held) != 0:
            return f"{int(held)} nanos still held"
        segments = spool_segments(spool_dir) if spool_dir is not None else []
        return f"spool segments left: {[p.name for p in segments]}" if segments else None

    await wait_until(check, timeout=timeout)


async def events_of(reader: LedgerReader, tenant: str, period: Period) -> list[CostEvent]:
    return [event async for event in reader.events(tenant, period)]


def assert_exactly_once(events: Iterable[CostEvent], ids: Iterable[str]) -> None:
    """The request ids and the event ids are the same set, and no event is stored twice."""
    counts = Counter(event.id for event in events)
    twice = sorted(request_id for request_id, n in counts.items() if n > 1)
    assert not twice, f"{len(twice)} events stored more than once, e.g. {twice[:3]}"
    expected = set(ids)
    assert set(counts) == expected, (
        f"missing {sorted(expected - set(counts))[:3]}, unexpected {sorted(set(counts) - expected)[:3]}"
    )


def counters_of(events: Iterable[CostEvent]) -> Counters:
    total = Counters()
    for event in events:
        total += Counters(
            requests=1,
            cost_nanos=event.cost_nanos,
            saving_nanos=event.saving_nanos,
            input_tokens=event.input_tokens,
            cached_tokens=event.cached_tokens,
            output_tokens=event.output_tokens,
            reasoning_tokens=event.reasoning_tokens,
        )
    return total


async def assert_counters_match(
    reader: LedgerReader, redis: aioredis.Redis, tenant: str, events: Sequence[CostEvent]
) -> None:
    """Every daily counter (overall and per model) and the monthly ones equal the sums of their events."""
    by_day: dict[str, list[CostEvent]] = {}
    for event in events:
        by_day.setdefault(day_of(event.time_ms), []).append(event)
    async for _, day, raw in reader.daily_hashes([(tenant, day) for day in sorted(by_day)]):
        stored = read_counters(raw)
        expected = {"": counters_of(by_day[day])}
        for model in {event.model for event in by_day[day]}:
            expected[model] = counters_of(event for event in by_day[day] if event.model == model)
        assert stored == expected, f"daily counters of {day}: {stored} != {expected}"
    by_month: dict[str, list[CostEvent]] = {}
    for event in events:
        by_month.setdefault(month_of(event.time_ms), []).append(event)
    for month, month_events in by_month.items():
        stored_month = read_counters(await redis.hgetall(KEYS.monthly(tenant, month)))[""]
        summed = counters_of(month_events)
        # the monthly hash keeps only these three
        assert (stored_month.requests, stored_month.cost_nanos, stored_month.saving_nanos) == (
            summed.requests,
            summed.cost_nanos,
            summed.saving_nanos,
        ), f"monthly counters of {month}: {stored_month} != {summed}"


def wait_until_written(gateway_url: str, *, timeout: float = 20.0) -> None:
    """Until every cost event the gateway has recorded is in Redis (``gateway_ledger_queue_depth`` 0 on
    its ``/metrics``): an event is recorded before its response reaches the client, so what a count read
    afterwards misses is only what later requests add."""
    deadline = time.monotonic() + timeout
    while True:
        text = httpx.get(f"{gateway_url}/metrics", timeout=10).text
        depth = next(
            sample.value
            for family in text_string_to_metric_families(text)
            for sample in family.samples
            if sample.name == "gateway_ledger_queue_depth"
        )
        if depth == 0:
            return
        assert time.monotonic() < deadline, f"the gateway's ledger still holds {depth:.0f} events unwritten"
        time.sleep(0.02)
