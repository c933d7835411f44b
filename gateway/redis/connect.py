"""Opening the process's Redis client from a URL: one function for the server and every command.

The node the URL names is asked what it is before the client is built (``INFO cluster``: a node of a Redis
Cluster says ``cluster_enabled:1``), and the client follows: a ``RedisCluster`` that finds the other nodes
from that one, or a pooled ``Redis``. A plain client on a cluster node would reach only the keys of that
node's slots and meet ``MOVED`` for every other tenant; a cluster client on a plain server fails every
command. ``GATEWAY_REDIS_CLUSTER`` (``cluster``) may force the mode; a node of the other kind is then
refused with the reason, never used with the wrong client.

A node that cannot be reached ends a command (``must_reach``: it has nothing to do without Redis), while the
server starts anyway, Redis down at start being a state it handles (events wait in the spool): with the
forced mode, else a plain client, marked unverified so that ``gateway.redis.mode`` asks the node again once
it answers.
"""

from __future__ import annotations

from dataclasses import dataclass

import redis.asyncio as aioredis
from redis.asyncio.cluster import RedisCluster
from redis.asyncio.connection import parse_url
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from gateway.redis.connection import Connection

UNREACHABLE = (RedisConnectionError, RedisTimeoutError, OSError)
"""What asking a node raises when it does not answer (a refused or lost connection, a timeout)."""
ASK_TIMEOUT = 2.0
"""Seconds the question to the node may take, connecting included."""


class RedisModeError(Exception):
    """The node is not of the kind ``GATEWAY_REDIS_CLUSTER`` says, or cannot tell which kind it is."""


@dataclass(frozen=True, slots=True)
class RedisMode:
    cluster: bool
    """The kind of client to open: ``RedisCluster`` (true) or ``Redis``."""
    forced: bool
    """The mode came from ``GATEWAY_REDIS_CLUSTER``, not from the node."""
    verified: bool
    """The node answered and is of that kind (false only when it could not be reached)."""


@dataclass(frozen=True, slots=True)
class RedisConnection:
    client: aioredis.Redis
    mode: RedisMode


async def open_redis(url: str, *, cluster: bool | None, must_reach: bool) -> RedisConnection:
    """The client for ``url``: ``cluster`` forces the mode (None: the node's own). Raises
    ``RedisModeError`` when the node is of the other kind than forced, and, with ``must_reach``, what
    redis-py raises when the node cannot be reached."""
    mode = await redis_mode(url, cluster=cluster, must_reach=must_reach)
    return RedisConnection(redis_client(url, cluster=mode.cluster), mode)


async def redis_mode(url: str, *, cluster: bool | None, must_reach: bool) -> RedisMode:
    """The mode ``open_redis`` opens ``url`` in, asked of the node; raises as it does."""
    try:
        node: bool | None = await node_is_cluster(url)
    except UNREACHABLE:
        if must_reach:
            raise
        node = None
    except ResponseError as exc:  # INFO refused (an ACL without it): only the setting can say
        if cluster is None:
            raise RedisModeError(
                f"cannot ask the Redis at {where(url)} whether it is a cluster node (INFO cluster: {exc}); "
                "set GATEWAY_REDIS_CLUSTER to true or false"
            ) from exc
        node = cluster
    chosen = chosen_mode(cluster, node, where=where(url))
    return RedisMode(cluster=chosen, forced=cluster is not None, verified=node is not None)


async def node_is_cluster(url: str) -> bool:
    """Whether the node ``url`` names runs in cluster mode, asked on a connection of its own."""
    probe = aioredis.Redis.from_url(
        url, socket_connect_timeout=ASK_TIMEOUT, socket_timeout=ASK_TIMEOUT, retry=Retry(NoBackoff(), 0)
    )
    try:
        info = await probe.info("cluster")
    finally:
        await probe.aclose()
    return str(info.get("cluster_enabled", 0)) == "1"


def chosen_mode(forced: bool | None, node: bool | None, *, where: str) -> bool:
    """The mode to open: the node's (``node``; None when it did not answer), unless ``forced`` says
    otherwise, which is refused."""
    if node is None:
        return bool(forced)
    if forced is None or forced == node:
        return node
    raise RedisModeError(mismatch(forced, where=where))


def mismatch(forced: bool, *, where: str) -> str:
    if forced:
        return (
            f"GATEWAY_REDIS_CLUSTER=true, but the Redis at {where} is not a cluster node (INFO cluster: "
            "cluster_enabled:0); point GATEWAY_REDIS_URL at a node of the cluster, or unset "
            "GATEWAY_REDIS_CLUSTER to have the mode detected"
        )
    return (
        f"GATEWAY_REDIS_CLUSTER=false, but the Redis at {where} is a Redis Cluster node (INFO cluster: "
        "cluster_enabled:1): a plain client would reach only the tenants whose keys that node holds; unset "
        "GATEWAY_REDIS_CLUSTER to have the mode detected, or set it to true"
    )


def where(url: str) -> str:
    """The node's address for messages: host and port, or the socket's path; never the password."""
    parts = parse_url(url)
    if "path" in parts:
        return str(parts["path"])
    return f"{parts.get('host', 'localhost')}:{parts.get('port', 6379)}"


def redis_pool(url: str) -> aioredis.BlockingConnectionPool:
    """Requests wait for a free connection rather than fail when many budget checks run at once. A
    command that meets a dropped connection (pooled before Redis restarted) is tried once more on a new
    one, so that the first requests after Redis is back do not fail on connections it closed."""
    pool: aioredis.BlockingConnectionPool = aioredis.BlockingConnectionPool.from_url(
        url,
        max_connections=128,
        timeout=5,
        socket_timeout=5,
        socket_connect_timeout=2,
        retry=stale_connection_retry(),
        connection_class=Connection,  # a URL of another scheme (unix://, rediss://) keeps its own class
    )
    return pool


def stale_connection_retry() -> Retry:
    return Retry(NoBackoff(), 1, supported_errors=(RedisConnectionError,))


def redis_client(url: str, *, cluster: bool) -> aioredis.Redis:
    """A pooled ``Redis``, or a ``RedisCluster`` that finds the other nodes from the one ``url`` names,
    built without asking the node (``open_redis`` asks). Every key the gateway writes carries a hash tag
    (the tenant, the model) and every script, pipeline and multi-key command stays within one tag, so both
    behave alike."""
    if not cluster:
        return aioredis.Redis(connection_pool=redis_pool(url))
    client = RedisCluster.from_url(
        url, max_connections=128, socket_timeout=5, socket_connect_timeout=2, retry=stale_connection_retry()
    )  # per node; budget checks are capped well below this, and an exhausted node fails fast
    # The gateway uses the commands both clients share; its parts are typed against ``Redis``.
    return client  # type: ignore[return-value]
