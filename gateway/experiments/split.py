"""Split routing: a share of an experiment's conversations goes to its candidate, decided once per
conversation, before counting, and remembered in Redis (``SET … NX``) so a conversation never changes
model mid-way, whatever the share becomes later.

A conversation is known by the client's ``prompt_cache_key``, else its ``user``, else the fingerprint of
its opening (tools, system prompt, first user message): the same opening the cache state anchors on. An
experiment that is disabled or whose ``sample_rate`` is 0 sends no new conversation to the candidate, and
those already there finish there; ``force_back: true`` sends them all back. A Responses turn chained to a
stored response follows the model that produced it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import orjson
from redis.asyncio import Redis
from redis.exceptions import RedisError

from gateway.experiments.matching import Watch
from gateway.experiments.store import ExperimentKeys
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


async def arm_of(redis: Redis, keys: ExperimentKeys, watch: Watch, conversation: str) -> Arm:
    """The conversation's arm: the one it was given first, else a new one (written only while the
    experiment takes new conversations). Redis unreachable: the primary (nothing changes model)."""
    experiment = watch.config
    if experiment.force_back:
        return "primary"
    key = keys.assignment(watch.name, conversation)
    try:
        if not experiment.enabled or experiment.sample_rate == 0:
            return "candidate" if await redis.get(key) in (b"candidate", "candidate") else "primary"
        chosen = fresh_arm(watch, conversation)
        previous = await redis.set(key, chosen, nx=True, get=True, ex=experiment.sticky_seconds)
    except (RedisError, OSError):
        return "primary"
    if previous is None:
        return chosen
    return "candidate" if previous in (b"candidate", "candidate") else "primary"
