"""What the commands share that read the gateway's Redis or its config: which Redis and which config they
use, and how a problem ends the command (a message on stderr, exit status 1). When Redis cannot be reached
the message says how to point the command at it, since the usual cause is a command looking in the wrong
place. A closed stdout (BrokenPipeError) is left to ``gateway.cli``, which ends every command quietly."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

import redis.asyncio as aioredis
from redis.asyncio.connection import parse_url
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

from gateway.config.loading import ConfigError, load_config
from gateway.config.schema.root import GatewayConfig
from gateway.config.settings import Settings
from gateway.redis.connect import RedisModeError, open_redis
from gateway.redis.server import embedded_redis_socket
from gateway.sampling.since import parse_since

POINT_AT_REDIS = (
    "Is the gateway running? Point this command at its Redis with --redis-url URL or GATEWAY_REDIS_URL, "
    "or, for the server the gateway embeds, set GATEWAY_DATA_DIR to the gateway's data directory (the "
    "socket is in $GATEWAY_DATA_DIR/redis/)"
)


class CommandError(Exception):
    """A problem to explain to the user in one line (exit status 1)."""


def run_command(work: Coroutine[Any, Any, int | None], *, command: str, redis_problem: str) -> int:
    """Run ``work``; its result is the exit status (None: 0). ``redis_problem`` leads the line shown when
    Redis answers with an error; a Redis that does not answer gets the hint of ``POINT_AT_REDIS``."""
    try:
        result = asyncio.run(work)
    except CommandError as exc:
        return _fail(command, str(exc))
    except (RedisConnectionError, RedisTimeoutError) as exc:
        return _fail(command, f"cannot reach the gateway's Redis: {exc}\n  {POINT_AT_REDIS}")
    except RedisError as exc:
        return _fail(command, f"{redis_problem}: {exc}")
    except BrokenPipeError:
        raise  # stdout's reader went away (``| head``): not a problem of this command
    except OSError as exc:  # a file the command reads or writes; redis-py wraps its own socket errors
        return _fail(command, str(exc))
    return result or 0


def _fail(command: str, message: str) -> int:
    print(f"gateway {command}: {message}", file=sys.stderr)
    return 1


def redis_url(explicit: str | None, settings: Settings) -> str:
    """``--redis-url``, else ``GATEWAY_REDIS_URL``, else the socket of the embedded server in the data
    directory (``GATEWAY_DATA_DIR``) when the gateway runs one."""
    if explicit:
        return _checked(explicit, source="--redis-url")
    if settings.redis_url:
        return _checked(settings.redis_url, source="GATEWAY_REDIS_URL")
    socket = embedded_redis_socket(settings.data_dir)
    if socket.exists():
        return f"unix://{socket}?db=0"
    raise CommandError(
        "set GATEWAY_REDIS_URL (or pass --redis-url) to the URL of the running gateway's Redis; no embedded "
        f"server's socket was found at {socket} (set GATEWAY_DATA_DIR to the gateway's data directory)"
    )


async def open_store(url: str, settings: Settings) -> aioredis.Redis:
    """The client for the gateway's Redis at ``url`` (from ``redis_url``), of the kind its node is: a Redis
    Cluster node gets a cluster client, unless ``GATEWAY_REDIS_CLUSTER`` forces a mode the node contradicts
    (then the command ends with the reason). A node that does not answer ends it with ``POINT_AT_REDIS``."""
    try:
        connection = await open_redis(url, cluster=settings.redis_cluster, must_reach=True)
    except RedisModeError as exc:
        raise CommandError(str(exc)) from exc
    return connection.client


def _checked(url: str, *, source: str) -> str:
    """``url`` when redis-py can parse it. Its ValueError would otherwise end the command with a
    traceback, for slips as common as ``localhost:6379``; the URL is not echoed, as it may hold a
    password."""
    try:
        parse_url(url)
    except ValueError as exc:
        raise CommandError(
            f"{source} is not a Redis URL ({exc}); for example redis://127.0.0.1:6379/0, "
            "rediss://HOST:PORT/0 (TLS) or unix:///path/to/redis.sock?db=0"
        ) from exc
    return url


def gateway_config(path: Path | None, settings: Settings, *, defaults: str) -> GatewayConfig | None:
    """The gateway's config: ``--config`` (an error when it does not load), else ``GATEWAY_CONFIG`` (None
    when it is missing or does not load, with a note on stderr that the command uses its ``defaults``:
    a command run outside the repository must not fail on the relative default path)."""
    file = path or settings.config
    if not file.exists():
        if path is not None:
            raise CommandError(f"no config file at {path}")
        print(
            f"note: no config file at {file} (pass --config or set GATEWAY_CONFIG); using the default "
            f"{defaults}",
            file=sys.stderr,
        )
        return None
    try:
        return load_config(file)
    except ConfigError as exc:
        if path is not None:
            raise CommandError(str(exc)) from exc
        print(f"note: {file} did not load; using the default {defaults}", file=sys.stderr)
        return None


def store_options(parser: argparse.ArgumentParser) -> None:
    """``--redis-url`` and ``--config``: where a command finds the running gateway's Redis and config."""
    parser.add_argument("--redis-url", help="Redis of the running gateway (default: GATEWAY_REDIS_URL)")
    parser.add_argument("--config", type=Path, help="the gateway's config file (default: GATEWAY_CONFIG)")


def since_of(text: str, *, now: float) -> float:
    """``--since`` as epoch seconds; a ``CommandError`` naming the option when it does not parse."""
    try:
        return parse_since(text, now=now)
    except ValueError as exc:
        raise CommandError(f"invalid --since: {exc}") from exc
