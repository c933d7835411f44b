"""Every reply of a pipelined write is read, and each failure is sorted into "try again later" or "refused
for good", against a real Redis."""

from __future__ import annotations

import pytest
import redis.asyncio as aioredis
from redis.exceptions import (
    AskError,
    BusyLoadingError,
    ClusterDownError,
    ConnectionError,
    MovedError,
    NoScriptError,
    ReadOnlyError,
    ResponseError,
    TimeoutError,
    TryAgainError,
)

from gateway.redis import pipelined
from gateway.redis.pipelined import WriteFailed, is_transient


@pytest.mark.parametrize(
    ("error", "transient"),
    [
        (ConnectionError("Connection closed by server."), True),
        (TimeoutError("Timeout reading from socket"), True),
        (OSError("connection reset"), True),
        (ClusterDownError("The cluster is down"), True),  # redis-py drops the word CLUSTERDOWN
        (TryAgainError("Multiple keys request during rehashing of slot"), True),
        (MovedError("3999 127.0.0.1:6381"), True),
        (AskError("3999 127.0.0.1:6381"), True),
        (ReadOnlyError("You can't write against a read only replica."), True),
        (BusyLoadingError("Redis is loading the dataset in memory"), True),
        (NoScriptError("No matching script."), True),
        (ResponseError("OOM command not allowed when used memory > 'maxmemory'."), True),
        (ResponseError("Error running script (call to f_1): @user_script:3: -NOREPLICAS Not enough good replicas to write."), True),  # noqa: E501
        (ResponseError("WRONGTYPE Operation against a key holding the wrong kind of value"), False),
        (ResponseError("ERR Error running script (call to f_1): @user_script:1: user_script:1: oops"), False),
    ],
)
def test_failures_are_sorted_into_transient_or_refused(error: Exception, transient: bool) -> None:
    assert is_transient(error) is transient


@pytest.mark.anyio
async def test_every_reply_is_read_and_the_failed_positions_named(
    redis_client: aioredis.Redis, tenant_name: str
) -> None:
    text, listed = f"{tenant_name}:text", f"{tenant_name}:list"
    await redis_client.rpush(listed, "x")  # type: ignore[misc]
    try:
        async with redis_client.pipeline(transaction=False) as pipe:
            pipe.set(text, "1")
            pipe.incr(listed)  # WRONGTYPE: a refusal in the middle of the pipeline
            pipe.set(text, "2")
            replies = await pipelined.execute(pipe)
        async with redis_client.pipeline(transaction=False) as pipe:
            pipe.set(text, "3")
            pipe.incr(listed)
            with pytest.raises(WriteFailed) as failed:
                await pipelined.execute_checked(pipe)
        value = await redis_client.get(text)
    finally:
        await redis_client.delete(text, listed)
    assert replies.failed == [1]
    assert replies.values[0] is True and replies.values[2] is True  # the others were applied
    assert failed.value.failed == (1,) and failed.value.transient is False
    assert value == b"3"
