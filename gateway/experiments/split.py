"""Split routing: a share of an experiment's conversations goes to its candidate, decided once per
conversation, before counting, and remembered in Redis so a conversation never changes model mid-way,
whatever the share becomes later.

The arm is read before counting (one round trip, which also counts the conversations the experiment
remembers) and a new conversation's arm is written only once its request is admitted (``remember``, a
script: ``SET … NX`` and the experiment's index), so a request refused for its budget leaves nothing behind.
Until then the choice is a pure function of the experiment and the conversation (``fresh_arm``), so a
second turn that arrives before the write lands gets the same arm. An experiment remembers at most
``limits.split_conversations_per_experiment`` live conversations; past that, new conversations stay on the
primary (counted as ``split_full``) and are not remembered.

A conversation is known by the client's ``prompt_cache_key``, else its ``user``, else the fingerprint of
its opening (tools, system prompt, first user message): the same opening the cache state anchors on. An
experiment that is disabled or whose ``sample_rate`` is 0 sends no new conversation to the candidate, and
those already there finish there; ``force_back: true`` sends them all back. A Responses turn chained to a
stored response follows the model that produced it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import orjson
from redis.asyncio import Redis

from gateway.config.experiments import Watch
from gateway.experiments.store import ExperimentKeys
from gateway.ledger.script import Script
from gateway.sampling.decide import sample_fraction

Arm = Literal["primary", "candidate"]
OPENING_MESSAGES = 8
"""The opening of a conversation is found within its first messages."""


def conversation_key(tenant: str, body: Mapping[str, Any], messages: Sequence[Any]) -> str:
    """A stable name for the request's conversation (hashed: nothing of the prompt is stored)."""
    state = hashlib.sha256(tenant.encode() + b"\x00")
    for field in ("prompt_cache_key", "user"):
        value = body.get(field)
        if isinstance(value, str) and value:
            state.update(f"{field}\x00{value}".encode())
            return state.hexdigest()[:32]
    state.update(orjson.dumps(body.get("tools") or []))
    for message in messages[:OPENING_MESSAGES]:
        state.update(orjson.dumps(message, option=orjson.OPT_SORT_KEYS))
        if isinstance(message, Mapping) and message.get("role") == "user":
            break
    return state.hexdigest()[:32]


def fresh_arm(watch: Watch, conversation: str) -> Arm:
    rate = watch.config.sample_rate
    chosen = rate > 0 and sample_fraction(f"{watch.name}\x00{conversation}") < rate
    return "candidate" if chosen else "primary"


@dataclass(frozen=True, slots=True)
class NewConversation:
    """A conversation seen for the first time, and the arm it was given: remembered once its request is
    admitted (``remember``), never for a request refused before it reached a model."""

    experiment: str
    conversation: str
    arm: Arm
    sticky_seconds: int


@dataclass(frozen=True, slots=True)
class Assignment:
    arm: Arm
    new: NewConversation | None = None
    """Set when the conversation has no arm yet: the one it is given now, to remember."""
    full: bool = False
    """The experiment remembers ``cap`` conversations already: a new one stays on the primary."""


PRIMARY = Assignment("primary")
CANDIDATE = Assignment("candidate")


async def assign(
    redis: Redis, keys: ExperimentKeys, watch: Watch, conversation: str, *, cap: int, now_ms: int
) -> Assignment:
    """The conversation's arm: the one it was given first, else a new one (only while the experiment
    takes new conversations and remembers fewer than ``cap``). One round trip; nothing is written.
    Raises Redis's errors (the caller falls back to the primary)."""
    experiment = watch.config
    if experiment.force_back:
        return PRIMARY
    key = keys.assignment(watch.name, conversation)
    if not experiment.enabled or experiment.sample_rate == 0:
        return CANDIDATE if _is_candidate(await redis.get(key)) else PRIMARY
    async with redis.pipeline(transaction=False) as pipe:
        pipe.get(key)
        pipe.zcount(keys.assignments(watch.name), now_ms, "+inf")
        stored, remembered = await pipe.execute()
    if stored is not None:
        return CANDIDATE if _is_candidate(stored) else PRIMARY
    if int(remembered) >= cap:
        return Assignment("primary", full=True)
    arm = fresh_arm(watch, conversation)
    return Assignment(arm, NewConversation(watch.name, conversation, arm, experiment.sticky_seconds))


_REMEMBER = Script(
    """
-- KEYS: 1 the conversation's arm, 2 the experiment's index of remembered conversations (expiry ms each)
-- ARGV: 1 arm, 2 ttl ms, 3 conversation, 4 now ms, 5 expiry ms
-- Returns 1 when the arm was written, 0 when the conversation had one already (the first one stays).
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return 0
end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', ARGV[4])
redis.call('ZADD', KEYS[2], ARGV[5], ARGV[3])
if redis.call('PTTL', KEYS[2]) < tonumber(ARGV[2]) then
  redis.call('PEXPIRE', KEYS[2], ARGV[2])
end
return 1
"""
)


async def remember(redis: Redis, keys: ExperimentKeys, new: NewConversation, *, now_ms: int) -> bool:
    """Write a new conversation's arm (``SET … NX``: a concurrent first turn's arm is kept) and count it
    in the experiment's index until it expires. Raises Redis's errors."""
    ttl_ms = new.sticky_seconds * 1000
    written = await _REMEMBER.run(
        redis,
        [keys.assignment(new.experiment, new.conversation), keys.assignments(new.experiment)],
        [new.arm, ttl_ms, new.conversation, now_ms, now_ms + ttl_ms],
    )
    return bool(written)


def _is_candidate(stored: object) -> bool:
    return stored in (b"candidate", "candidate")
