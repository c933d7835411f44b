"""The one typed object that holds what the app opened in its lifespan."""

from __future__ import annotations

from dataclasses import dataclass

import redis.asyncio as aioredis

from gateway.alerts.checker import AlertChecker
from gateway.config.reload import ConfigStore
from gateway.config.settings import Settings
from gateway.edge.readiness import Readiness
from gateway.fronts.responses.stored import StoredResponses
from gateway.keys.live import ManagedKeys
from gateway.ledger import Ledger
from gateway.ledger.source import LedgerSource
from gateway.metrics.exposition import GatewayMetrics
from gateway.proxy.pipeline import Pipeline
from gateway.redis.mode import ModeWatch
from gateway.sampling.store import SampleWriter
from gateway.upstream.clients import UpstreamPool


@dataclass(slots=True)
class GatewayState:
    settings: Settings
    store: ConfigStore
    pool: UpstreamPool
    redis: aioredis.Redis
    pipeline: Pipeline
    responses: StoredResponses
    ledger: Ledger
    reader: LedgerSource
    samples: SampleWriter
    metrics: GatewayMetrics
    mode: ModeWatch
    readiness: Readiness
    alerts: AlertChecker
    keys: ManagedKeys
