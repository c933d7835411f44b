"""What the commands that read or write the gateway's Redis share: which Redis and which config they use,
and how a problem ends the command (one line on stderr, exit status 1)."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

from redis.exceptions import RedisError

from gateway.config import GatewayConfig
from gateway.configfile import ConfigError, load_config
from gateway.redisserver import embedded_redis_socket
from gateway.settings import Settings


class CommandError(Exception):
    """A problem to explain to the user in one line (exit status 1)."""


def run_command(work: Coroutine[Any, Any, int | None], *, command: str, redis_problem: str) -> int:
    """Run ``work``; its result is the exit status (None: 0). ``redis_problem`` leads the line shown when
    Redis cannot be reached or fails."""
    try:
        result = asyncio.run(work)
    except CommandError as exc:
        print(f"gateway {command}: {exc}", file=sys.stderr)
        return 1
    except (RedisError, OSError) as exc:
        print(f"gateway {command}: {redis_problem}: {exc}", file=sys.stderr)
        return 1
    return result or 0


def redis_url(explicit: str | None, settings: Settings) -> str:
    """``--redis-url``, else ``GATEWAY_REDIS_URL``, else the socket of the embedded server in the data
    directory (``GATEWAY_DATA_DIR``) when the gateway runs one."""
    if explicit:
        return explicit
    if settings.redis_url:
        return settings.redis_url
    socket = embedded_redis_socket(settings.data_dir)
    if socket.exists():
        return f"unix://{socket}?db=0"
    raise CommandError(
        "set GATEWAY_REDIS_URL (or pass --redis-url) to the URL of the running gateway's Redis; no embedded "
        f"server's socket was found at {socket} (set GATEWAY_DATA_DIR to the gateway's data directory)"
    )


def gateway_config(path: Path | None, settings: Settings, *, defaults: str) -> GatewayConfig | None:
    """The gateway's config: ``--config`` (an error when it does not load), else ``GATEWAY_CONFIG`` (None
    when it is missing or does not load, with a note that the command uses its ``defaults``)."""
    file = path or settings.config
    if not file.exists():
        if path is not None:
            raise CommandError(f"no config file at {path}")
        return None
    try:
        return load_config(file)
    except ConfigError as exc:
        if path is not None:
            raise CommandError(str(exc)) from exc
        print(f"note: {file} did not load; using the default {defaults}", file=sys.stderr)
        return None
