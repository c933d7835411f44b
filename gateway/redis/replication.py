"""Writes that must survive a Redis Cluster failover: confirmed on a replica, with ``WAIT``.

Redis replicates asynchronously. When a master dies (``kill -9``, a lost machine), the cluster promotes one
of its replicas, and a write the old master had answered but not yet passed on is gone. A writer that must
not lose what it wrote (the ledger, the responses the gateway remembers) adds ``WAIT 1 <ms>`` for every
node its pipeline writes to, in the same pipeline: the reply comes over the same connection, after the
writes, once a replica has them. No reply (the node died) means the writes are not known to be safe and
are tried again (the ledger's apply script and the remembered responses are idempotent); ``0`` means the
replica lags: the writes are on a live master, which is what a single Redis gives, and it is counted.

On a single Redis (no cluster) nothing is added: there is no failover to lose writes to.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from redis.asyncio import Redis
from redis.asyncio.client import Pipeline
from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.crc import key_slot
from redis.exceptions import RedisClusterException, RedisError

WAIT_REPLICAS = 1
"""A replica of the node, the one the cluster promotes first (the most up to date), must have the write."""
WAIT_MS = 500


def nodes_to_confirm(redis: Redis, keys: Iterable[str]) -> list[ClusterNode]:
    """The masters holding ``keys`` that have replicas, each once; empty on a single Redis."""
    if not isinstance(redis, RedisCluster):
        return []
    nodes: dict[str, ClusterNode] = {}
    for key in keys:
        slot = key_slot(key.encode())
        held_by = redis.nodes_manager.slots_cache.get(slot)
        if held_by and len(held_by) > 1:
            nodes.setdefault(held_by[0].name, held_by[0])
    return list(nodes.values())


def add_waits(pipe: Pipeline, nodes: Sequence[ClusterNode], *, timeout_ms: int = WAIT_MS) -> None:
    """Append one ``WAIT`` per node to ``pipe``, after its writes."""
    for node in nodes:
        pipe.execute_command("WAIT", WAIT_REPLICAS, timeout_ms, target_nodes=node)


def unconfirmed(acks: Sequence[object]) -> int:
    """How many ``WAIT`` replies say no replica has the writes yet (errors are the caller's to check)."""
    return sum(1 for ack in acks if isinstance(ack, int) and ack < WAIT_REPLICAS)


async def refresh_topology(redis: Redis) -> None:
    """After a failed write on a cluster: learn the slots again, so that the next try goes to the node
    that holds them now (a promoted replica), not to the one that died. Nothing on a single Redis."""
    if not isinstance(redis, RedisCluster):
        return
    try:
        await redis.initialize()  # a client not used yet learns the slots and the command table
        await redis.nodes_manager.initialize()
    except (RedisError, RedisClusterException, OSError):  # still failing over: the next try asks again
        return
