"""The Redis keys of experiments and their reads and writes. Each experiment's keys carry the experiment as
a hash tag, ``{experiment:<name>}``, the same tag as the ledger tenant its shadow spend is billed to
(``gateway.config.schema.experiments.bill_tenant``), so all of them share one Cluster slot.

====================================  ======  ===============================================================
key                                   type    holds
====================================  ======  ===============================================================
gw:{experiment:<name>}:pairs          stream  one entry per compared request (field ``pair``: its JSON,
                                              ``gateway.experiments.report.records``), capped at
                                              ``PAIRS_MAXLEN``
gw:{experiment:<name>}:traffic:<day>  hash    the UTC day's counters: ``n:<low>`` and ``cost:<low>``
                                              (matching requests and their primary cost in nano-dollars, by
                                              the ``low`` token count of their context bucket),
                                              ``shadowed``, ``shed`` (and ``shed_slots``,
                                              ``shed_cpu``, ``shed_tasks``), ``over_budget``, ``failed``,
                                              ``excluded``, ``oversized``, ``split_candidate``,
                                              ``split_primary``, ``split_full``
gw:{experiment:<name>}:arm:<conv>     string  the arm a conversation was assigned by split routing
gw:{experiment:<name>}:arms           zset    the conversations remembered by split routing, scored by
                                              their arm's expiry (ms): the live ones are counted against
                                              ``limits.split_conversations_per_experiment``
====================================  ======  ===============================================================

The stream is trimmed with ``XADD … MAXLEN ~`` on every write and, like the day hashes, expires
``TRAFFIC_TTL_SECONDS`` after its last write, so an experiment removed from the config leaves nothing
behind for long.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import anyio
import orjson
import structlog
from redis.asyncio import Redis

from gateway.ledger.reply import integer, text
from gateway.redis import pipelined

PAIRS_MAXLEN = 200_000
TRAFFIC_TTL_SECONDS = 90 * 86_400
PAGE = 5_000
FIELD = "pair"

log = structlog.get_logger("gateway.experiments")


@dataclass(frozen=True, slots=True)
class ExperimentKeys:
    prefix: str = "gw"
    """The ledger's ``key_prefix``."""

    def pairs(self, name: str) -> str:
        return f"{self.prefix}:{{experiment:{name}}}:pairs"

    def traffic(self, name: str, day: str) -> str:
        """``day``: ``YYYY-MM-DD``, UTC."""
        return f"{self.prefix}:{{experiment:{name}}}:traffic:{day}"

    def assignment(self, name: str, conversation: str) -> str:
        return f"{self.prefix}:{{experiment:{name}}}:arm:{conversation}"

    def assignments(self, name: str) -> str:
        return f"{self.prefix}:{{experiment:{name}}}:arms"


async def add_pair(redis: Redis, keys: ExperimentKeys, name: str, pair: Mapping[str, Any]) -> None:
    """Append one pair (capped, ``MAXLEN ~``) and push the stream's expiry out."""
    await add_pairs(redis, keys, [(name, pair)])


async def add_pairs(
    redis: Redis, keys: ExperimentKeys, pairs: Sequence[tuple[str, Mapping[str, Any]]]
) -> list[tuple[str, Mapping[str, Any]]]:
    """Append many pairs, of one or more experiments, in one round trip (the live part's batches); returns
    the pairs whose append failed (every reply is read: on a cluster one node can fail alone)."""
    if not pairs:
        return []
    async with redis.pipeline(transaction=False) as pipe:
        for name, pair in pairs:
            key = keys.pairs(name)
            pipe.xadd(key, {FIELD: orjson.dumps(pair)}, maxlen=PAIRS_MAXLEN, approximate=True)
            pipe.expire(key, TRAFFIC_TTL_SECONDS)
        replies = (await pipelined.execute(pipe)).values
    return [pair for pair, reply in zip(pairs, replies[::2], strict=True) if pipelined.is_failure(reply)]


async def add_traffic(
    redis: Redis, keys: ExperimentKeys, name: str, day: str, counts: Mapping[str, int]
) -> None:
    """Add ``counts`` to the day's counters (``HINCRBY`` each) and set the day's expiry, in one round trip,
    all or nothing (``MULTI``/``EXEC``: the day's hash is one key), so that a failed write can be tried
    again without counting twice what went through."""
    added = {field: count for field, count in counts.items() if count}
    if not added:
        return
    key = keys.traffic(name, day)
    async with redis.pipeline(transaction=True) as pipe:
        for field, count in added.items():
            pipe.hincrby(key, field, count)
        pipe.expire(key, TRAFFIC_TTL_SECONDS)
        await pipelined.execute_checked(pipe)


async def read_pairs(
    redis: Redis,
    keys: ExperimentKeys,
    name: str,
    *,
    since_ms: int,
    until_ms: int | None = None,
    limit: int = PAIRS_MAXLEN,
) -> list[dict[str, Any]]:
    """The pairs with stream ids in ``[since_ms, until_ms)``, the newest ``limit`` of them, oldest first.

    Pages are decoded in a worker thread; an entry that is not a JSON object is skipped (and counted in a
    log line). Whether a decoded object is a usable pair is the report's to judge."""
    key = keys.pairs(name)
    found: list[dict[str, Any]] = []
    high, low = ("+" if until_ms is None else f"({until_ms}-0"), f"{since_ms}-0"
    skipped = 0
    while len(found) < limit:
        wanted = min(PAGE, limit - len(found))
        page = await redis.xrevrange(key, max=high, min=low, count=wanted)
        if not page:
            break
        decoded, unreadable = await anyio.to_thread.run_sync(_decode_page, page)
        found.extend(decoded)
        skipped += unreadable
        high = f"({text(page[-1][0])}"
        if len(page) < wanted:
            break
    if skipped:
        log.warning("experiment_pairs_unreadable", experiment=name, skipped=skipped)
    found.reverse()
    return found


async def read_traffic(redis: Redis, keys: ExperimentKeys, name: str, days: Sequence[str]) -> dict[str, int]:
    """The counters of ``days``, summed."""
    total: dict[str, int] = {}
    for counts in (await read_traffic_days(redis, keys, name, days)).values():
        for field, count in counts.items():
            total[field] = total.get(field, 0) + count
    return total


async def read_traffic_days(
    redis: Redis, keys: ExperimentKeys, name: str, days: Sequence[str]
) -> dict[str, dict[str, int]]:
    """Each day's counters, for the days of ``days`` that have any; fields that are not integers are left
    out."""
    if not days:
        return {}
    async with redis.pipeline(transaction=False) as pipe:
        for day in days:
            pipe.hgetall(keys.traffic(name, day))
        raw_days = await pipe.execute()
    found: dict[str, dict[str, int]] = {}
    for day, raw in zip(days, raw_days, strict=True):
        counts = _counters(raw)
        if counts:
            found[day] = counts
    return found


async def has_data(redis: Redis, keys: ExperimentKeys, name: str, days: Sequence[str]) -> bool:
    """Whether the experiment has a pairs stream, or counters on any of ``days`` (one key slot: one call)."""
    names = [keys.pairs(name), *(keys.traffic(name, day) for day in days)]
    return bool(await redis.exists(*names))


def _counters(raw: Mapping[Any, Any]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for field, value in raw.items():
        try:
            counts[text(field)] = integer(value)
        except ValueError:
            continue
    return counts


def _decode_page(page: Sequence[Any]) -> tuple[list[dict[str, Any]], int]:
    """The entries of one ``XREVRANGE`` page that hold a JSON object, and how many did not."""
    decoded: list[dict[str, Any]] = []
    skipped = 0
    for _, fields in page:
        payload = fields.get(FIELD.encode(), fields.get(FIELD)) if fields else None
        try:
            value = orjson.loads(payload) if isinstance(payload, bytes | str) else None
        except orjson.JSONDecodeError:
            value = None
        if isinstance(value, dict):
            decoded.append(value)
        else:
            skipped += 1
    return decoded, skipped
