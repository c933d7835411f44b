"""The background checker: every few seconds it reads the budgeted tenants' spend through the ledger
reader, works out the alerts due, claims each in Redis (``SET NX``, one key per tenant, period and alert,
so every worker and instance may check and only one sends), and queues the claimed ones for the webhook.

It never touches a request: requests only write the cost events it reads. With ``alerts.webhook_url``
unset it reads nothing from Redis and sends nothing; it only looks at the in-memory config again after a
while, so an alert section added by a hot reload starts without a restart.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import structlog
from redis.asyncio import Redis
from redis.exceptions import RedisError

from gateway.alerts.alert import Alert
from gateway.alerts.fit import count_window, fit_alerts
from gateway.alerts.ladder import Spend, forecast_alert, ladder_alerts
from gateway.alerts.webhook import Webhook
from gateway.config.schema.root import GatewayConfig
from gateway.ledger.keys import LedgerKeys
from gateway.ledger.period import Period
from gateway.ledger.reader import LedgerReader

log = structlog.get_logger("gateway.alerts")

IDLE_SECONDS = 5.0
"""How often a checker whose alerts are off looks at the config again (no Redis, no network)."""


class AlertChecker:
    def __init__(
        self,
        redis: Redis,
        *,
        reader: LedgerReader,
        config: Callable[[], GatewayConfig],
        webhook: Webhook,
        keys: LedgerKeys | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._redis = redis
        self._reader = reader
        self._config = config
        self._webhook = webhook
        self._keys = keys or reader.keys
        self._clock = clock
        self._next_fit_ms = 0

    async def run(self) -> None:
        """Check until cancelled; no error ends the checking."""
        while True:
            alerts = self._config().alerts
            if not alerts.enabled:
                await asyncio.sleep(IDLE_SECONDS)
                continue
            try:
                await self.check()
            except (RedisError, OSError) as exc:
                log.warning("alert_check_failed", error=str(exc) or type(exc).__name__)
            except Exception:
                log.exception("alert_check_failed")
            await asyncio.sleep(alerts.check_interval_seconds)

    async def check(self) -> list[Alert]:
        """One round: claims and queues what is due; returns the alerts queued."""
        config = self._config()
        if not config.alerts.enabled:
            return []
        now_ms = int(self._clock() * 1000)
        sent = await self._budgets(config, now_ms)
        fit = config.alerts.policy_fit
        if fit.enabled and now_ms >= self._next_fit_ms:
            self._next_fit_ms = now_ms + int(fit.interval_seconds * 1000)
            sent += await self._fit(config, now_ms)
        return sent

    async def _budgets(self, config: GatewayConfig, now_ms: int) -> list[Alert]:
        settings = config.alerts
        sent = []
        for tenant, tenant_config in sorted(config.tenants.items()):
            budget = tenant_config.budget
            if budget is None:
                continue
            thresholds = (
                budget.alert_thresholds if budget.alert_thresholds is not None else settings.thresholds
            )
            if not thresholds and not settings.forecast:
                continue
            usage = await self._reader.usage(tenant, now_ms=now_ms)
            spend = Spend(usage.today.cost_nanos, usage.this_month.cost_nanos)
            ladder = ladder_alerts(tenant, budget, thresholds, spend, now_ms=now_ms)
            sent += await self._claim_highest(ladder)
            if settings.forecast:
                forecast = forecast_alert(
                    tenant, budget, spend, now_ms=now_ms, after_hours=settings.forecast_after_hours
                )
                if forecast is not None and await self._claim(forecast):
                    sent.append(forecast)
        for alert in sent:
            self._webhook.send(alert)
        return sent

    async def _claim_highest(self, ladder: list[Alert]) -> list[Alert]:
        """Claims every rung reached; per period only the highest newly claimed one is sent (spend that
        jumps from 40% to 90% says 80%, not 50% and then 80%)."""
        highest: dict[str, Alert] = {}
        for alert in ladder:  # lowest first
            if await self._claim(alert):
                highest[alert.period] = alert
        return list(highest.values())

    async def _fit(self, config: GatewayConfig, now_ms: int) -> list[Alert]:
        fit = config.alerts.policy_fit
        window = Period(now_ms - fit.window_minutes * 60_000, now_ms + 1)
        sent = []
        for tenant in sorted(config.tenants):
            count = await count_window(self._reader.events(tenant, window))
            for alert in fit_alerts(tenant, count, fit, now_ms=now_ms):
                if await self._claim(alert):
                    sent.append(alert)
                    self._webhook.send(alert)
        return sent

    async def _claim(self, alert: Alert) -> bool:
        key = self._keys.alert(alert.tenant, alert.period, alert.name)
        claimed = await self._redis.set(key, int(self._clock() * 1000), nx=True, pxat=alert.claim_until_ms)
        return bool(claimed)
