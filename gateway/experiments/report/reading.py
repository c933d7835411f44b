"""Reading an experiment's report from Redis: its pairs and traffic counters, and the day's shadow spend
from the ledger (the tenant ``experiment:<name>``, ``gateway.config.schema.experiments.bill_tenant``).

Shared by ``GET /admin/experiments/{name}/report`` and ``gateway experiments report``. Up to 200,000
pairs: they are decoded page by page and the report is built in worker threads, never on the event loop
that serves the gateway's requests.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import Any

import anyio
from redis.asyncio import Redis

from gateway.base.money import nanos_from_usd, usd
from gateway.config.schema.experiments import ExperimentConfig, bill_tenant
from gateway.config.schema.root import GatewayConfig
from gateway.config.schema.sampling import DEFAULT_BUCKET_EDGES
from gateway.experiments.report.report import ExperimentReport, build_report
from gateway.experiments.store import ExperimentKeys, has_data, read_pairs, read_traffic_days
from gateway.ledger.keys import LedgerKeys
from gateway.ledger.period import Period, to_ms
from gateway.ledger.reader import LedgerReader


@dataclass(frozen=True, slots=True)
class Setting:
    """What a report needs of the gateway's config (the defaults when the config is unknown)."""

    key_prefix: str = "gw"
    edges: tuple[int, ...] = DEFAULT_BUCKET_EDGES
    experiments: tuple[tuple[str, ExperimentConfig], ...] = ()

    @classmethod
    def of(cls, config: GatewayConfig | None) -> Setting:
        if config is None:
            return cls()
        return cls(config.ledger.key_prefix, config.sampling.buckets, tuple(config.experiments.items()))

    def experiment(self, name: str) -> ExperimentConfig | None:
        return dict(self.experiments).get(name)


async def spent_today(redis: Redis, *, key_prefix: str, name: str, now_ms: int) -> int:
    """The experiment's spend of the UTC day so far, in nano-dollars, from the ledger's daily counters."""
    reader = LedgerReader(redis, keys=LedgerKeys(key_prefix))
    return (await reader.usage(bill_tenant(name), now_ms=now_ms)).today.cost_nanos


async def read_report(
    redis: Redis,
    *,
    name: str,
    setting: Setting,
    since_ms: int,
    until_ms: int,
    min_samples: int = 30,
) -> ExperimentReport | None:
    """The report of ``[since_ms, until_ms)``; None when the experiment is neither configured nor has data."""
    keys = ExperimentKeys(setting.key_prefix)
    config = setting.experiment(name)
    days = Period(since_ms, max(until_ms, since_ms + 1)).days()
    if config is None and not await has_data(redis, keys, name, days):
        return None
    by_day = await read_traffic_days(redis, keys, name, days)
    traffic: dict[str, int] = {}
    for counts in by_day.values():
        for field, count in counts.items():
            traffic[field] = traffic.get(field, 0) + count
    first = min(by_day, default=None)
    traffic_since = to_ms(datetime.fromisoformat(first)) if first is not None else None
    pairs = await read_pairs(redis, keys, name, since_ms=since_ms, until_ms=until_ms)
    spent = await spent_today(redis, key_prefix=setting.key_prefix, name=name, now_ms=until_ms - 1)
    build = partial(
        build_report, name, config, pairs, traffic, edges=setting.edges, since_ms=since_ms, until_ms=until_ms,
        spent_today_nanos=spent, min_samples=min_samples, traffic_since_ms=traffic_since,
    )  # fmt: skip
    return await anyio.to_thread.run_sync(build)


@dataclass(frozen=True, slots=True)
class Listed:
    """A configured experiment and its shadow spend of the day."""

    name: str
    config: ExperimentConfig
    spent_today_nanos: int

    def document(self) -> dict[str, Any]:
        """The JSON form (``GET /admin/experiments``, ``gateway experiments list --json``)."""
        config = self.config
        budget = config.budget_usd_per_day
        return {
            "name": self.name,
            "mode": config.mode,
            "primary": list(config.primary),
            "candidate": config.candidate,
            "sample_rate": config.sample_rate,
            "enabled": config.enabled,
            "budget_usd_per_day": usd(nanos_from_usd(budget), trim=True) if budget is not None else None,
            "spent_today_usd": usd(self.spent_today_nanos),
        }


async def list_experiments(redis: Redis, *, setting: Setting, now_ms: int) -> list[Listed]:
    """The configured experiments, by name."""
    found = []
    for name, config in sorted(setting.experiments, key=lambda item: item[0]):
        spent = await spent_today(redis, key_prefix=setting.key_prefix, name=name, now_ms=now_ms)
        found.append(Listed(name, config, spent))
    return found
