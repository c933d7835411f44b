"""Applying a batch of cost events to Redis: one pipelined round trip, one atomic script call per chunk.

A batch is split by tenant (a script may only touch one tenant's keys: one Cluster slot) into chunks of
up to ``CHUNK_EVENTS``; each chunk is one EVALSHA that dedups, appends and adds up its events atomically.

Every reply of the pipeline is read (``gateway.redis.pipelined``): on a Redis Cluster a node that fails
mid-read puts an error in place of each of its replies while the other nodes' replies are real. Every failure
is sorted into one of two kinds: the store is unavailable (connection lost, timeout, a server that is loading,
read-only or out of memory, a cluster failing over), so the whole batch is retried later from the spool; or
the server refused a chunk for good (foreign data under a ledger key), in which case its events are tried one
by one and those refused are set aside rather than retried forever. On a cluster the pipeline ends with a
``WAIT`` per node (``gateway.redis.replication``), and a batch no replica confirmed comes back
``unconfirmed``: the writer applies it again until a replica has it or the master that took it is known dead
(then from the spool, on the promoted replica). Because the script is idempotent, retrying a batch that was
partly applied never counts anything twice.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from redis.asyncio import Redis
from redis.asyncio.cluster import ClusterNode
from redis.exceptions import NoScriptError, RedisClusterException, RedisError, ResponseError

from gateway.base.types import MANAGED_KEY_PREFIX
from gateway.ledger.event import CostEvent
from gateway.ledger.keys import LedgerKeys
from gateway.ledger.period import day_of, month_expiry
from gateway.ledger.script import APPLY_EVENTS, Script
from gateway.redis import pipelined
from gateway.redis.pipelined import WriteFailed, describe, failures, is_transient
from gateway.redis.replication import add_waits, nodes_to_confirm, unconfirmed

CHUNK_EVENTS = 100
"""Events per script call: enough to share the counter updates, few enough to keep Redis responsive."""
EXACT_LIMIT = 2**52
"""Money summed inside one script call stays below this, where Lua's double arithmetic is still exact."""


Command = tuple[str | bytes | int, ...]
Rejected = tuple[CostEvent, str]


class StoreUnavailable(Exception):
    """Redis cannot take writes right now; the events must wait in the spool."""


@dataclass(frozen=True, slots=True)
class BatchResult:
    applied: int
    duplicates: int
    rejected: tuple[Rejected, ...] = ()
    unconfirmed: bool = False
    """On a Redis Cluster: a master took the batch but no replica confirmed it within the wait, so a
    failover could still lose it; the writer applies it again until one does."""


class EventApplier:
    """Writes batches of events with the apply script; knows the key layout and the retention."""

    def __init__(self, redis: Redis, *, keys: LedgerKeys, retention_months: int) -> None:
        self._redis = redis
        self._keys = keys
        self._retention = retention_months
        self._script = Script(APPLY_EVENTS)
        self._expiry: dict[str, int] = {}

    async def apply(self, events: Sequence[CostEvent]) -> BatchResult:
        chunks, rejected = self._chunks(events)
        replies, lagged = await self._run(chunks, tenants={event.tenant for event in events})
        applied = duplicates = 0
        retry_alone: list[CostEvent] = []
        for chunk, reply in zip(chunks, replies, strict=True):
            if isinstance(reply, ResponseError):
                retry_alone.extend(chunk)
                continue
            if not isinstance(reply, list):  # not the script's answer: nothing is known to be written
                raise StoreUnavailable(f"unexpected reply to the apply script: {type(reply).__name__}")
            flags = reply
            applied += sum(1 for flag in flags if flag == 1)
            duplicates += sum(1 for flag in flags if flag != 1)
        if retry_alone:  # a refused chunk: find the events that are refused on their own
            alone = [[event] for event in retry_alone]
            replies, lagged_alone = await self._run(alone, tenants=set())
            lagged = lagged or lagged_alone
            for [event], reply in zip(alone, replies, strict=True):
                if isinstance(reply, ResponseError):
                    rejected.append((event, str(reply)))
                elif reply == [1]:
                    applied += 1
                else:
                    duplicates += 1
        return BatchResult(applied, duplicates, tuple(rejected), lagged)

    async def _run(
        self, chunks: Sequence[Sequence[CostEvent]], *, tenants: set[str]
    ) -> tuple[list[object], bool]:
        """Send the chunks in one pipeline, once more after loading the script if the server lacked it;
        the replies, and whether a replica failed to confirm them within the wait.

        Every reply is read: a chunk, the tenants' index or a replica's acknowledgement that failed for a
        reason that may pass (``gateway.redis.pipelined``) makes the whole batch unavailable, to be tried
        again from the spool; only a chunk the server refused for good comes back as an error reply."""
        commands = [self._command(chunk) for chunk in chunks]
        confirm = nodes_to_confirm(self._redis, self._slot_keys(chunks, tenants))
        try:
            replies, lagged = await self._send(commands, tenants, confirm)
            if any(isinstance(reply, NoScriptError) for reply in replies):
                await self._script.load(self._redis)
                replies, lagged = await self._send(commands, tenants, confirm)
        except (RedisError, RedisClusterException, OSError) as exc:  # lost, timed out, or no script
            raise StoreUnavailable(describe(exc)) from exc
        for reply in replies:
            if isinstance(reply, BaseException) and is_transient(reply):
                raise StoreUnavailable(describe(reply)) from reply
        return replies, lagged

    async def _send(
        self, commands: Sequence[Command], tenants: set[str], confirm: Sequence[ClusterNode]
    ) -> tuple[list[object], bool]:
        """The chunks' replies and whether a replica lagged; raises when the tenants' index or a replica
        acknowledgement failed."""
        pipe = self._redis.pipeline(transaction=False)
        for command in commands:
            pipe.execute_command("EVALSHA", *command)
        for tenant in sorted(tenants):
            pipe.sadd(self._keys.tenants(), tenant)
        add_waits(pipe, confirm)
        replies = (await pipelined.execute(pipe)).values
        scripts, rest = replies[: len(commands)], replies[len(commands) :]
        failed = failures(rest)
        if failed:
            error = rest[failed[0]]
            assert isinstance(error, BaseException)
            raise WriteFailed(failed, error)
        return scripts, unconfirmed(rest[len(tenants) :]) > 0

    def _slot_keys(self, chunks: Sequence[Sequence[CostEvent]], tenants: set[str]) -> list[str]:
        """One key per slot the batch writes: each tenant's, and the tenants' index."""
        keys = [self._keys.holds(chunk[0].tenant) for chunk in chunks]
        return [*keys, self._keys.tenants()] if tenants else keys

    def _chunks(self, events: Sequence[CostEvent]) -> tuple[list[list[CostEvent]], list[Rejected]]:
        by_tenant: dict[str, list[list[CostEvent]]] = {}
        sums: dict[str, int] = {}
        rejected: list[Rejected] = []
        for event in events:
            weight = abs(event.cost_nanos) + abs(event.counterfactual_nanos)
            if weight >= EXACT_LIMIT:
                rejected.append((event, "amount beyond the exact range of the ledger (2**52 nano-dollars)"))
                continue
            chunks = by_tenant.setdefault(event.tenant, [[]])
            if len(chunks[-1]) >= CHUNK_EVENTS or sums.get(event.tenant, 0) + weight >= EXACT_LIMIT:
                chunks.append([])
                sums[event.tenant] = 0
            chunks[-1].append(event)
            sums[event.tenant] = sums.get(event.tenant, 0) + weight
        return [chunk for chunks in by_tenant.values() for chunk in chunks], rejected

    def _command(self, chunk: Sequence[CostEvent]) -> Command:
        keys, tenant = self._keys, chunk[0].tenant
        month_numbers: dict[str, int] = {}
        day_numbers: dict[str, int] = {}
        event_args: list[str | bytes] = []
        for event in chunk:
            day = day_of(event.time_ms)
            month_number = month_numbers.setdefault(day[:7], len(month_numbers) + 1)
            day_number = day_numbers.setdefault(day, len(day_numbers) + 1)
            event_args += (
                event.id,
                f"{month_number} {day_number} {event.time_ms:013d} {event.cost_nanos} {event.saving_nanos} "
                f"{event.input_tokens} {event.cached_tokens} {event.output_tokens} {event.reasoning_tokens} "
                f"{event.key_id if event.key_id.startswith(MANAGED_KEY_PREFIX) else '-'} {event.model}",
                event.to_json(),
            )
        key_names = [keys.holds(tenant), keys.hold_expiry(tenant)]
        for month in month_numbers:
            key_names += (
                keys.seen(tenant, month), keys.stream(tenant, month), keys.order(tenant, month),
                keys.monthly(tenant, month),
            )  # fmt: skip
        key_names += (keys.daily(tenant, day) for day in day_numbers)
        expiries = [self._expires(month) for month in month_numbers]
        return (self._script.sha, len(key_names), *key_names, len(month_numbers), *expiries, *event_args)

    def _expires(self, month: str) -> int:
        expires = self._expiry.get(month)
        if expires is None:
            expires = self._expiry[month] = month_expiry(month, retention_months=self._retention)
        return expires
