"""``gateway serve``: run the gateway with uvicorn (uvloop, httptools), N worker processes.

Every option is also an environment variable (``GATEWAY_<OPTION>``). Without a Redis URL an embedded Redis
server is started here, in the serving process, so that all workers share it; it stops last, on exit.
"""

from __future__ import annotations

import argparse
import os
import signal
from pathlib import Path
from typing import Any

import uvicorn

from gateway.configfile import ConfigError, load_config
from gateway.redisserver import EmbeddedRedis
from gateway.settings import Settings


def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    parser = subparsers.add_parser("serve", help="run the gateway", description=__doc__)
    parser.add_argument("--config", type=Path, help="YAML config file [GATEWAY_CONFIG]")
    parser.add_argument("--host", help="address to listen on [GATEWAY_HOST, 127.0.0.1]")
    parser.add_argument("--port", type=int, help="port to listen on [GATEWAY_PORT, 8080]")
    parser.add_argument("--redis-url", help="Redis URL; unset starts an embedded Redis [GATEWAY_REDIS_URL]")
    parser.add_argument("--admin-key", help="key for /admin/* routes [GATEWAY_ADMIN_KEY]")
    parser.add_argument(
        "--log-level", choices=["debug", "info", "warning", "error"], help="[GATEWAY_LOG_LEVEL]"
    )
    parser.add_argument("--log-format", choices=["json", "console"], help="[GATEWAY_LOG_FORMAT, json]")
    parser.add_argument("--data-dir", type=Path, help="embedded Redis data, spool [GATEWAY_DATA_DIR]")
    parser.add_argument("--workers", type=int, help="worker processes [GATEWAY_WORKERS, 1]")
    parser.add_argument(
        "--graceful-timeout", type=float, default=30.0, help="seconds in-flight requests get on shutdown"
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    overrides = {
        name: value
        for name in (
            "config",
            "host",
            "port",
            "redis_url",
            "admin_key",
            "log_level",
            "log_format",
            "data_dir",
            "workers",
        )
        if (value := getattr(args, name)) is not None
    }
    for name, value in overrides.items():
        os.environ[f"GATEWAY_{name.upper()}"] = str(value)
    settings = Settings()
    try:
        load_config(settings.config)
    except ConfigError as exc:
        print(exc)
        return 2
    embedded = None
    # uvicorn re-raises the signal that stopped it once it has shut down; with these handlers that
    # becomes SystemExit here, so the embedded Redis below is stopped last instead of being orphaned.
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, _exit_on_signal)
    if settings.redis_url is None:
        embedded = EmbeddedRedis(settings.data_dir / "redis")
        os.environ["GATEWAY_REDIS_URL"] = embedded.start()
        print(f"gateway: embedded Redis at {embedded.url} (data in {embedded.data_dir})", flush=True)
    try:
        uvicorn.run(
            "gateway.app:create_app_from_env",
            factory=True,
            host=settings.host,
            port=settings.port,
            workers=settings.workers,
            loop="uvloop",
            http="httptools",
            lifespan="on",
            access_log=False,
            log_level=settings.log_level,
            timeout_graceful_shutdown=args.graceful_timeout,
            server_header=False,
        )
    except SystemExit as stop:
        return 0 if stop.code in (None, 0) else 1
    finally:
        if embedded is not None:
            embedded.stop()
    return 0


def _exit_on_signal(signum: int, frame: object) -> None:
    raise SystemExit(0)
