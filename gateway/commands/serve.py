"""``gateway serve``: run the gateway with uvicorn (uvloop, httptools), N worker processes.

HTTP is ``gateway.edge.server_protocol``: uvicorn's httptools protocol with limits on request heads (size,
count) and timeouts for heads and bodies that stop arriving; idle keep-alive is uvicorn's own timeout.

Every option is also an environment variable (``GATEWAY_<OPTION>``). Without a Redis URL an embedded Redis
server is started here, in the serving process, so that all workers share it; it stops last, on exit. With
one, its node is asked here, before any worker starts, whether it is a Redis Cluster node: a mode
``--redis-cluster``/``--no-redis-cluster`` forces that the node contradicts ends the command (exit status 2).
A server older than the gateway's minimum (``gateway.redis.version``), embedded or named, is refused: exit 2.

Workers: with more than one, this process makes the app (the factory loads the config's token
vocabularies, then imports and builds the app; the lifespan waits for each worker), then forks the
workers from itself (``gateway.edge.prefork``), so that they share one copy of all that instead of each
building its own; with one, this process is the worker. A process running a thread of
its own (the mock upstream's) cannot fork safely: its workers are spawned, each loading everything.

Metrics: ``PROMETHEUS_MULTIPROC_DIR`` is set to a fresh ``<data dir>/metrics`` before any worker starts, so
every worker writes its metrics there and a scrape of any of them shows the sum over all.

With ``--mock-upstream`` (``gateway.mockupstream``) a stand-in for the providers starts first, in this
process, before the config is read (it names the mock's address in the variables the config reads), and
the start prints the tenant key and a request to try; it stops after the workers.

Shutdown (SIGTERM or SIGINT): stop accepting, let the requests and streams in flight finish for up to
``--graceful-timeout`` seconds (then cancel them; what they used is still metered), flush the ledger to
Redis, stop the workers, and stop the embedded Redis last. The exit status is 0.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog
import uvicorn
from pydantic import ValidationError

from gateway.config.loading import ConfigError, load_config
from gateway.config.schema.root import GatewayConfig
from gateway.config.settings import Settings
from gateway.config.startup import admin_notice, startup_notices
from gateway.edge.logs import configure_logging
from gateway.edge.prefork import fork_safe, run_forked
from gateway.edge.server_protocol import GuardedHttpToolsProtocol
from gateway.redis.connect import RedisModeError, redis_mode, where
from gateway.redis.server import EmbeddedRedis, EmbeddedRedisError, embedded_redis_dir
from gateway.redis.version import RedisVersionError, check_configured

if TYPE_CHECKING:
    from gateway.mockupstream.server import MockUpstream

APP = "gateway.edge.factory:create_app_from_env"  # vocabularies first, then the app
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
WORKER_HEALTHCHECK_SECONDS = 30
WITH_DEFAULTS = frozenset({"graceful_timeout"})
"""Options whose parser default is a value: they reach the environment only when given."""
OPTIONS = (
    "config",
    "host",
    "port",
    "redis_url",
    "redis_cluster",
    "admin_key",
    "metrics_key",
    "log_level",
    "log_format",
    "data_dir",
    "workers",
    "graceful_timeout",
    "max_header_bytes",
    "max_headers",
    "header_timeout",
    "body_timeout",
    "keepalive_timeout",
    "mock_upstream",
)


def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    parser = subparsers.add_parser("serve", help="run the gateway", description=__doc__)
    parser.add_argument("--config", type=Path, help="YAML config file [GATEWAY_CONFIG]")
    parser.add_argument("--host", help="address to listen on [GATEWAY_HOST, 127.0.0.1]")
    parser.add_argument("--port", type=int, help="port to listen on [GATEWAY_PORT, 8080]")
    parser.add_argument("--redis-url", help="Redis URL; unset starts an embedded Redis [GATEWAY_REDIS_URL]")
    parser.add_argument(
        "--redis-cluster",
        action=argparse.BooleanOptionalAction,
        help=(
            "the Redis URL names a node of a Redis Cluster (--no-redis-cluster: a standalone server); "
            "a node of the other kind is refused [GATEWAY_REDIS_CLUSTER, auto: asked of the node]"
        ),
    )
    parser.add_argument("--admin-key", help="key for /admin/* routes [GATEWAY_ADMIN_KEY]")
    parser.add_argument("--metrics-key", help="key for GET /metrics; unset: open [GATEWAY_METRICS_KEY]")
    parser.add_argument(
        "--log-level", choices=["debug", "info", "warning", "error"], help="[GATEWAY_LOG_LEVEL]"
    )
    parser.add_argument("--log-format", choices=["json", "console"], help="[GATEWAY_LOG_FORMAT, json]")
    parser.add_argument("--data-dir", type=Path, help="embedded Redis data, spool [GATEWAY_DATA_DIR]")
    parser.add_argument("--workers", type=int, help="worker processes [GATEWAY_WORKERS, 1]")
    parser.add_argument(
        "--graceful-timeout",
        type=float,
        action=Given,
        default=Settings.model_fields["graceful_timeout"].default,
        help="seconds in-flight requests and streams get on shutdown [GATEWAY_GRACEFUL_TIMEOUT, 30]",
    )
    parser.add_argument(
        "--max-header-bytes",
        type=int,
        help="bytes a request head may take; more: 431 [GATEWAY_MAX_HEADER_BYTES, 65536]",
    )
    parser.add_argument(
        "--max-headers", type=int, help="headers a request may have; more: 431 [GATEWAY_MAX_HEADERS, 100]"
    )
    parser.add_argument(
        "--header-timeout",
        type=float,
        help="seconds a request head may take to arrive; then 408 [GATEWAY_HEADER_TIMEOUT, 10]",
    )
    parser.add_argument(
        "--body-timeout",
        type=float,
        help="seconds a request body may send nothing; then the connection closes [GATEWAY_BODY_TIMEOUT, 30]",
    )
    parser.add_argument(
        "--keepalive-timeout",
        type=float,
        help="seconds an idle keep-alive connection stays open [GATEWAY_KEEPALIVE_TIMEOUT, 5]",
    )
    parser.add_argument(
        "--mock-upstream",
        action="store_const",
        const=True,
        help=(
            "start a built-in mock upstream (canned answers, no provider key) and point "
            "${OPENAI_BASE_URL} and ${ANTHROPIC_BASE_URL} at it; prints the tenant key and a request "
            "to try [GATEWAY_MOCK_UPSTREAM]"
        ),
    )
    parser.set_defaults(handler=run, given=frozenset())


class Given(argparse.Action):
    """Stores the value and notes that it was given: an option whose default is shown (and read by the
    deploy checks) must still not override its environment variable when left out."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        setattr(namespace, self.dest, values)
        namespace.given = namespace.given | {self.dest}


def run(args: argparse.Namespace) -> int:
    for name in OPTIONS:
        value = getattr(args, name)
        if name in args.given or (value is not None and name not in WITH_DEFAULTS):
            os.environ[f"GATEWAY_{name.upper()}"] = str(value)
    os.environ.pop(MULTIPROC_ENV, None)  # chosen below, once the data directory is known
    try:
        settings = Settings()
    except ValidationError as exc:
        print(f"gateway serve: {exc}")
        return 2
    if not settings.mock_upstream:
        return serve_gateway(settings, None)
    from gateway.mockupstream.server import MockUpstream  # only with the flag: workers never need it

    mock = MockUpstream.start()  # before the config is read: it names the mock's URL
    try:
        return serve_gateway(settings, mock)
    finally:
        mock.stop()


def serve_gateway(settings: Settings, mock: MockUpstream | None) -> int:
    key = None
    if mock is not None:
        from gateway.mockupstream.server import tenant_key

        key = tenant_key()
    try:
        config = load_config(settings.config)
    except ValidationError as exc:
        print(f"gateway serve: {exc}")
        return 2
    except ConfigError as exc:
        print(exc)
        return 2
    configure_logging(settings.log_level, settings.log_format)
    refused = redis_mode_refused(settings)
    if refused is not None:
        print(f"gateway serve: {refused}", flush=True)
        return 2
    announce(settings, config)
    if mock is not None and key is not None:
        from gateway.mockupstream.server import try_lines

        for line in try_lines(config, mock, key, host=settings.host, port=settings.port):
            print(line, flush=True)
    os.environ[MULTIPROC_ENV] = str(fresh_metrics_dir(settings.data_dir))
    # uvicorn re-raises the signal that stopped it once it has shut down; with these handlers that
    # becomes SystemExit here, so the embedded Redis below is stopped last instead of being orphaned.
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, _exit_on_signal)
    try:
        embedded = redis_for_workers(settings)
    except (EmbeddedRedisError, RedisVersionError) as exc:
        print(f"gateway serve: {exc}", flush=True)
        return 2
    options: dict[str, Any] = {
        "factory": True,
        "host": settings.host,
        "port": settings.port,
        "workers": settings.workers,
        "loop": "uvloop",
        "http": GuardedHttpToolsProtocol,  # httptools with head limits and timeouts
        "timeout_keep_alive": settings.keepalive_timeout,
        "lifespan": "on",
        "access_log": False,
        "log_level": settings.log_level,
        "timeout_graceful_shutdown": settings.graceful_timeout,
        "server_header": False,
        # a worker still importing on a busy machine must not be taken for a hung one and killed
        "timeout_worker_healthcheck": WORKER_HEALTHCHECK_SECONDS,
    }
    forking = settings.workers > 1 and fork_safe()
    if settings.workers > 1 and not forking:
        print(
            "gateway: a thread runs in this process: each worker is spawned and loads its own vocabularies",
            flush=True,
        )
    try:
        if forking:
            server = uvicorn.Config(APP, **options)
            server.load()  # the app, made here by the factory (vocabularies first), for every worker
            run_forked(server, [server.bind_socket()])
        else:
            uvicorn.run(APP, **options)
    except SystemExit as stop:
        return 0 if stop.code in (None, 0) else 1
    finally:
        if embedded is not None:
            embedded.stop()
    return 0


def redis_mode_refused(settings: Settings) -> str | None:
    """Why the Redis of ``GATEWAY_REDIS_URL`` cannot be used in the mode ``GATEWAY_REDIS_CLUSTER`` forces,
    asked once here, before any worker: a worker refusing at start would be started again and again. A
    Redis that does not answer is no reason (each worker asks again; see ``gateway.redis.mode``)."""
    if settings.redis_url is None:
        return None
    try:
        mode = asyncio.run(redis_mode(settings.redis_url, cluster=settings.redis_cluster, must_reach=False))
    except RedisModeError as exc:
        return str(exc)
    state = "" if mode.verified else ", assumed: it does not answer yet"
    kind = "a Redis Cluster" if mode.cluster else "a standalone Redis"
    print(f"gateway: {kind} at {where(settings.redis_url)}{state}", flush=True)
    return None


def redis_for_workers(settings: Settings) -> EmbeddedRedis | None:
    """Without a Redis URL: the embedded server, started, its URL exported for the workers. With one: None,
    once the server there is known not to be too old (or cannot be asked yet)."""
    if settings.redis_url is not None:
        version = check_configured(settings.redis_url)
        if version is None:
            print("gateway: warning: could not ask Redis for its version; it was not checked", flush=True)
        return None
    embedded = EmbeddedRedis(embedded_redis_dir(settings.data_dir))
    os.environ["GATEWAY_REDIS_URL"] = embedded.start()
    print(f"gateway: embedded {embedded.version} at {embedded.url} (data in {embedded.data_dir})", flush=True)
    return embedded


def announce(settings: Settings, config: GatewayConfig) -> None:
    """Once per start, before any worker: what the gateway will call, tenants no key can reach, and whether
    the admin routes answer."""
    notices = startup_notices(config, settings.config.read_text(encoding="utf-8"))
    notices.append(admin_notice(bool(settings.admin_key)))
    for notice in notices:
        prefix = "warning: " if notice.level == "warning" else ""
        print(f"gateway: {prefix}{notice.text}", flush=True)
    log = structlog.get_logger("gateway.startup")
    for notice in notices:
        (log.warning if notice.level == "warning" else log.info)(notice.event, **notice.fields)


def fresh_metrics_dir(data_dir: Path) -> Path:
    """``<data dir>/metrics``, emptied: the files of an earlier run would otherwise be added in."""
    path = (data_dir / "metrics").resolve()
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    return path


def _exit_on_signal(signum: int, frame: object) -> None:
    raise SystemExit(0)
