"""What the app opens when it starts and closes when it stops, in one place and in order.

Closing runs in reverse: experiments' shadow calls (they bill the experiment), background jobs (they may
still call the cheap model), the upstream clients, the metrics (this process's gauges leave the sums), the
sampler's writer, the ledger (drained to Redis, else to the spool), Redis, and the embedded Redis last.
The server has stopped accepting and let the requests in flight finish (up to ``graceful_timeout``)
before any of this runs.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AsyncExitStack
from functools import partial
from typing import TYPE_CHECKING

import redis.asyncio as aioredis
import structlog
from redis.exceptions import RedisError

from gateway.alerts.checker import AlertChecker
from gateway.alerts.webhook import Webhook
from gateway.base.background import Background
from gateway.config.reload import ConfigStore
from gateway.config.schema.ledger import LedgerConfig
from gateway.config.schema.root import GatewayConfig
from gateway.config.schema.sampling import SamplingConfig
from gateway.config.settings import Settings
from gateway.conversations.recorder import ConversationRecorder
from gateway.conversations.store import ConversationStore
from gateway.core.metering import LedgerRecorder
from gateway.edge.logs import RequestLog
from gateway.edge.readiness import Readiness
from gateway.edge.state import GatewayState
from gateway.fronts.responses.memory import ResponseMemory
from gateway.fronts.responses.pending import Settler
from gateway.fronts.responses.stored import StoredResponses
from gateway.keys.live import ManagedKeys
from gateway.keys.store import KeyStore
from gateway.ledger import BudgetConfig, Budgets, Ledger, LedgerReader
from gateway.ledger.sources import ledger_source
from gateway.metrics import GatewayMetrics, RequestMetrics, StateReading
from gateway.proxy.pipeline import Pipeline
from gateway.redis.connect import RedisModeError, open_redis
from gateway.redis.connect import redis_client as redis_client  # its home before gateway.redis.connect
from gateway.redis.mode import ModeWatch
from gateway.redis.server import EmbeddedRedis, embedded_redis_dir
from gateway.sampling.observer import Sampler
from gateway.sampling.store import SampleWriter
from gateway.telemetry.switch import start_tracing
from gateway.tokens.counter import TokenCounter
from gateway.upstream.clients import ClientFactory, UpstreamPool, default_client

if TYPE_CHECKING:  # imported when an archive is configured: it brings psycopg
    from gateway.ledger.drainer import ArchiveDrainer

log = structlog.get_logger("gateway.app")


class LiveConfig:
    """Reads of the current config, so that every long-lived part sees hot reloads."""

    def __init__(self, store: ConfigStore) -> None:
        self._store = store

    def config(self) -> GatewayConfig:
        return self._store.current.config

    def counter(self) -> TokenCounter:
        return self._store.current.counter

    def sampling(self) -> SamplingConfig:
        return self._store.current.config.sampling

    def budget_of(self, tenant: str) -> BudgetConfig | None:
        found = self._store.current.config.tenants.get(tenant)
        return found.budget if found is not None else None


def state_reading(
    ledger: Ledger, samples: SampleWriter, store: ConfigStore, drainer: ArchiveDrainer | None = None
) -> StateReading:
    return StateReading(
        ledger_queue=ledger.stats().unwritten,
        sampler_queue=samples.stats().queued,
        reload_failures=store.reload_failures,
        config_rejected=store.last_error is not None,
        archive=None if drainer is None else drainer.stats(),
    )


async def open_process_redis(
    stack: AsyncExitStack, settings: Settings, *, restart: Callable[[], None] | None
) -> tuple[aioredis.Redis, ModeWatch]:
    """The process's Redis client (the embedded server started first when no URL is set), of the kind
    its node is (``gateway.redis.connect``), and what watches that the kind still fits."""
    redis_url = settings.redis_url
    if redis_url is None:
        embedded = EmbeddedRedis(embedded_redis_dir(settings.data_dir))
        redis_url = embedded.start()
        stack.callback(embedded.stop)
        log.info("embedded_redis_started", url=redis_url)
    try:
        connection = await open_redis(redis_url, cluster=settings.redis_cluster, must_reach=False)
    except RedisModeError as exc:
        log.error("redis_mode_refused", reason=str(exc))
        raise
    stack.push_async_callback(connection.client.aclose)
    mode = ModeWatch(redis_url, connection.mode, restart=restart)
    if mode.problem is not None:
        log.warning("redis_mode_unverified", reason=mode.problem)
    return connection.client, mode


async def start_archive_drainer(
    stack: AsyncExitStack, redis: aioredis.Redis, config: LedgerConfig
) -> ArchiveDrainer:
    """Drain the cost streams into the PostgreSQL archive (``ledger.archive``) until the app stops. It
    connects when it first drains, so a PostgreSQL that is down delays nothing at start-up."""
    from gateway.ledger.archive_store import ArchiveStore
    from gateway.ledger.drainer import ArchiveDrainer

    assert config.archive is not None
    drainer = ArchiveDrainer(redis, ArchiveStore(config.archive), config=config)
    drainer.start()
    stack.push_async_callback(drainer.close)  # before Redis closes (the stack closes in reverse)
    return drainer


async def open_managed_keys(
    stack: AsyncExitStack, redis: aioredis.Redis, live: LiveConfig, *, prefix: str
) -> ManagedKeys:
    """The process's copy of the managed keys (``gateway.keys.live``), read before the first request when
    ``keys.managed`` is on, then followed; while it is off the follower only sleeps."""
    keys = ManagedKeys(KeyStore(redis, prefix=prefix), settings=lambda: live.config().keys)
    if live.config().keys.managed:
        try:
            await keys.refresh()
        except (RedisError, OSError) as exc:  # the follower keeps trying
            log.warning("managed_keys_unreadable", error=str(exc))
    keys.start()
    stack.push_async_callback(keys.aclose)
    return keys


async def open_gateway(
    stack: AsyncExitStack,
    settings: Settings,
    *,
    client_factory: ClientFactory | None,
    counter: TokenCounter | None,
    restart: Callable[[], None] | None = None,
) -> GatewayState:
    store = ConfigStore(settings.config, counter=counter)
    live = LiveConfig(store)
    redis, mode = await open_process_redis(stack, settings, restart=restart)
    ledger_config = live.config().ledger
    ledger = Ledger(redis, spool_dir=settings.data_dir / "spool", config=ledger_config)
    await ledger.start()
    stack.push_async_callback(ledger.close, 10.0)
    drainer = None
    if ledger_config.archive is not None:  # off the request path: a background task of its own
        drainer = await start_archive_drainer(stack, redis, ledger_config)
    samples = SampleWriter(redis, config=live.sampling)
    await samples.start()
    stack.push_async_callback(samples.close)
    metrics = GatewayMetrics(
        multiproc_dir=settings.metrics_dir,
        spool_dir=settings.data_dir / "spool",
        read_state=partial(state_reading, ledger, samples, store, drainer),
        archive=drainer is not None,
    )
    await metrics.start()
    stack.push_async_callback(metrics.close)
    request_metrics = RequestMetrics(metrics.families, config=live.config)
    recorder = LedgerRecorder(
        ledger, config=live.config, counter=live.counter, sinks=[request_metrics.count_event]
    )
    pool = UpstreamPool(client_factory or partial(default_client, transport=settings.http_transport))
    stack.push_async_callback(pool.aclose)
    background = Background()
    stack.push_async_callback(background.aclose)
    conversations = ConversationStore(
        redis,
        prefix=ledger_config.key_prefix,
        max_per_tenant=lambda: live.config().limits.conversations_per_tenant,
    )
    tracing = start_tracing(stack, settings, live.config)  # None when off: the SDK is not imported
    observers = (
        recorder,  # first: it prices the request, and the log line carries that cost
        RequestLog(),
        Sampler(samples, config=live.sampling),
        request_metrics,
        ConversationRecorder(conversations, background),
        *((tracing,) if tracing is not None else ()),
    )
    memory = ResponseMemory(
        redis, prefix=ledger_config.key_prefix, spool_dir=settings.data_dir / "spool-responses"
    )
    memory.start()
    stack.push_async_callback(memory.aclose)  # after the requests, before Redis closes: a last try
    keys = await open_managed_keys(stack, redis, live, prefix=ledger_config.key_prefix)
    pipeline = Pipeline(
        store=store,
        pool=pool,
        redis=redis,
        observers=observers,
        background=background,
        budgets=Budgets(
            redis, budget_of=live.budget_of, config=ledger_config, key_budget_of=keys.budget_of
        ),
        conversations=conversations,
        experiment_errors=metrics.families.count_experiment_error,
        tracing=tracing is not None,
        managed_keys=keys,
    )
    stack.push_async_callback(pipeline.experiments.aclose)  # before the pool and the ledger: shadow calls end
    reader = LedgerReader(redis, keys=ledger.keys, budget_of=live.budget_of)  # alerts: the live counters
    webhook = Webhook(
        lambda: live.config().alerts,
        count=lambda kind, outcome: metrics.families.alerts.labels(kind, outcome).inc(),
    )
    stack.push_async_callback(webhook.aclose)
    return GatewayState(
        settings=settings,
        store=store,
        pool=pool,
        redis=redis,
        pipeline=pipeline,
        responses=StoredResponses(memory, Settler(memory, observers=observers, store=store, pool=pool)),
        ledger=ledger,
        reader=ledger_source(ledger_config, redis, keys=ledger.keys, budget_of=live.budget_of),
        samples=samples,
        metrics=metrics,
        mode=mode,
        readiness=Readiness(redis, ledger, mode),
        alerts=AlertChecker(redis, reader=reader, config=live.config, webhook=webhook),
        keys=keys,
    )
