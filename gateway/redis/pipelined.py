"""Pipelined writes whose every reply is checked.

A pipeline run with ``raise_on_error=False`` hands back, for each command, its reply or the exception that
took its place. On a Redis Cluster, a node whose connection breaks while its replies are read puts a
``ConnectionError`` in place of each of its replies while the other nodes' replies are real: a pipeline
that did not raise has not necessarily written anything. Every writer that pipelines reads its replies
through this module and keeps what failed for a later try.

Two kinds of failure, as the ledger has always sorted them:
- *transient*: the store could not take the write now (a lost or refused connection, a timeout, a node
  that is loading, read-only, out of memory, a cluster that is failing over or a redirect that was not
  followed); the same write must be tried again later;
- *refused*: the server answered the command with an error that trying again will not change (a key of
  the wrong type, a script error).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

import anyio
from redis.asyncio.client import Pipeline
from redis.exceptions import (
    AskError,
    BusyLoadingError,
    ClusterDownError,
    NoScriptError,
    OutOfMemoryError,
    ReadOnlyError,
    RedisClusterException,
    RedisError,
    ResponseError,
    TryAgainError,
)

TRANSIENT_REPLIES = (
    "OOM", "LOADING", "BUSY", "READONLY", "MASTERDOWN", "TRYAGAIN", "CLUSTERDOWN", "NOREPLICAS"
)  # fmt: skip
"""Error replies, by their first word, that say "not now" (a parser that knows no class for them keeps
the word in the message)."""
TRANSIENT_CLASSES: tuple[type[Exception], ...] = (
    ClusterDownError,  # and MasterDownError
    TryAgainError,
    AskError,  # and MovedError: a redirect the client did not follow
    ReadOnlyError,
    OutOfMemoryError,
    BusyLoadingError,
    NoScriptError,  # a node that lost its script cache (a promoted replica): load it, then try again
)


class WriteFailed(RedisError):
    """Some replies of a pipelined write were errors; ``failed`` holds their positions."""

    def __init__(self, failed: Sequence[int], first: BaseException) -> None:
        super().__init__(f"{len(failed)} pipelined command(s) failed, first: {describe(first)}")
        self.failed = tuple(failed)
        self.first = first
        self.transient = all_transient([first])


def is_failure(reply: object) -> bool:
    return isinstance(reply, BaseException)


def is_transient(error: BaseException) -> bool:
    """Whether trying the same write again later may succeed."""
    if isinstance(error, TRANSIENT_CLASSES):
        return True
    if isinstance(error, ResponseError):  # also inside a script's error: "Error running script … -OOM …"
        message = str(error)
        inside_script = any(f"-{word} " in message for word in TRANSIENT_REPLIES)
        return message.startswith(TRANSIENT_REPLIES) or inside_script
    return isinstance(error, RedisError | OSError | TimeoutError)  # connection lost or refused, timeout


def all_transient(errors: Sequence[BaseException]) -> bool:
    return all(is_transient(error) for error in errors)


def describe(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__


def failures(replies: Sequence[object]) -> list[int]:
    """The positions of the replies that are errors."""
    return [position for position, reply in enumerate(replies) if is_failure(reply)]


@dataclass(frozen=True, slots=True)
class Replies:
    """What a pipeline answered, one entry per command: a reply or the exception in its place."""

    values: list[object]

    @property
    def failed(self) -> list[int]:
        return failures(self.values)

    def check(self) -> list[object]:
        """The replies, or ``WriteFailed`` naming every position that failed."""
        failed = self.failed
        if failed:
            first = self.values[failed[0]]
            assert isinstance(first, BaseException)
            raise WriteFailed(failed, first)
        return self.values


async def execute(pipe: Pipeline) -> Replies:
    """Run ``pipe`` and return every reply, errors in place (never a silent partial success)."""
    values: list[object] = await pipe.execute(raise_on_error=False)
    return Replies(values)


async def execute_checked(pipe: Pipeline) -> list[object]:
    """Run ``pipe``; ``WriteFailed`` if any reply is an error (the others were applied)."""
    return (await execute(pipe)).check()


FAILURES = (RedisError, RedisClusterException, OSError, TimeoutError)
"""What a write to Redis can raise: a refusal, a lost or refused connection, a timeout."""


async def retried(
    write: Callable[[], Awaitable[object]],
    pauses: Sequence[float],
    *,
    before_retry: Callable[[], Awaitable[None]] | None = None,
) -> BaseException | None:
    """Run ``write``, and again after each of ``pauses`` while its failure may pass (``is_transient``):
    None once it went through, else the last failure. ``before_retry`` runs before each new try (on a
    cluster: learn the slots again)."""
    for pause in (*pauses, None):
        try:
            await write()
            return None
        except FAILURES as exc:
            if pause is None or not is_transient(exc):
                return exc
        if before_retry is not None:
            await before_retry()
        await anyio.sleep(pause)
    return None  # not reached: the last pass returns
