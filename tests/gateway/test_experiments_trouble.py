"""Redis errors of experiments: an error Redis answers with is told apart from an unreachable Redis, logged
at most once a minute per experiment, operation and kind, and counted every time (real Redis)."""

from __future__ import annotations

import uuid

import pytest
import redis.asyncio as aioredis
from redis.exceptions import RedisError
from structlog.testing import capture_logs

from gateway.experiments.store import ExperimentKeys, add_pairs, add_traffic, read_traffic
from gateway.experiments.tally import Tally
from gateway.experiments.trouble import RedisTrouble, kind_of
from tests.gateway.experiment_factories import NOW_MS


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


async def error_of(redis: aioredis.Redis, *command: object) -> RedisError:
    with pytest.raises(RedisError) as caught:
        await redis.execute_command(*command)
    return caught.value


@pytest.mark.anyio
async def test_errors_redis_answers_are_named_by_their_code(
    redis_client: aioredis.Redis, dead_redis: aioredis.Redis
) -> None:
    key = f"trouble-{uuid.uuid4().hex[:8]}"
    await redis_client.rpush(key, "a list")
    try:
        assert kind_of(await error_of(redis_client, "GET", key)) == "WRONGTYPE"
        with pytest.raises(RedisError) as piped:
            async with redis_client.pipeline(transaction=False) as pipe:
                pipe.get(key)
                await pipe.execute()
        assert kind_of(piped.value) == "WRONGTYPE"  # a pipeline's error keeps its code
        assert kind_of(await error_of(redis_client, "SET", key, "v", "BOGUS")) == "ResponseError"  # ERR ...
        assert kind_of(await error_of(dead_redis, "GET", key)) == "unreachable"
    finally:
        await redis_client.delete(key)


def test_a_repeated_error_is_logged_once_a_minute_and_counted_every_time() -> None:
    counted: list[tuple[str, str, str]] = []
    clock = Clock()
    trouble = RedisTrouble(lambda *labels: counted.append(labels), clock=clock)
    error = RedisError("WRONGTYPE Operation against a key holding the wrong kind of value")
    with capture_logs() as logs:
        for _ in range(5):
            trouble.note("exp", "assign", error, fallback="primary")
        trouble.note("other", "assign", error, fallback="primary")  # another experiment: its own line
        clock.now += 61
        trouble.note("exp", "assign", error, fallback="primary")
    assert counted == [("exp", "assign", "WRONGTYPE")] * 5 + [("other", "assign", "WRONGTYPE")] + [
        ("exp", "assign", "WRONGTYPE")
    ]
    lines = [(line["experiment"], line["not_logged_since"]) for line in logs]
    assert lines == [("exp", 0), ("other", 0), ("exp", 4)]
    assert {line["event"] for line in logs} == {"experiment_redis_error"}


@pytest.mark.anyio
async def test_counters_refused_by_a_wrong_type_are_counted_and_kept(redis_client: aioredis.Redis) -> None:
    keys, name = ExperimentKeys(), f"typed-{uuid.uuid4().hex[:8]}"
    day = "2025-12-01"
    counted: list[tuple[str, str, str]] = []
    trouble = RedisTrouble(lambda *labels: counted.append(labels))
    tally = Tally(
        lambda experiment, on, counts: add_traffic(redis_client, keys, experiment, on, counts),
        lambda pairs: add_pairs(redis_client, keys, pairs),
        every=3600,  # flushed by hand here
        trouble=trouble,
    )
    await redis_client.set(keys.traffic(name, day), "not a hash")
    try:
        tally.add(name, NOW_MS, "shadowed")
        with capture_logs() as logs:
            await tally.flush()
        assert counted == [(name, "traffic", "WRONGTYPE")]
        assert [line["event"] for line in logs] == ["experiment_redis_error"]
        assert tally.pending() == {(name, day): {"shadowed": 1}}  # kept for the next flush
        await redis_client.delete(keys.traffic(name, day))
        await tally.aclose()
        assert await read_traffic(redis_client, keys, name, [day]) == {"shadowed": 1}
    finally:
        await redis_client.delete(keys.traffic(name, day))
