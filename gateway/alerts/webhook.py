"""Delivering alerts: a bounded queue and one sender task per process, retries with a doubling wait.

An alert was claimed before it is queued (at most once across instances), so a delivery that fails every
attempt is not sent again: it is logged (``alert_failed``) and counted (``outcome="failed"``). Nothing here
is awaited by a request; a full queue drops the alert, logged and counted (``outcome="dropped"``).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

import httpx
import structlog

from gateway.alerts.alert import Alert
from gateway.config.schema.alerts import AlertsConfig

log = structlog.get_logger("gateway.alerts")

Count = Callable[[str, str], None]
"""``count(kind, outcome)``: one more delivery outcome (``gateway_alerts_total``)."""


class Webhook:
    def __init__(
        self,
        config: Callable[[], AlertsConfig],
        *,
        count: Count,
        client: httpx.AsyncClient | None = None,
    ) -> None:
        self._config = config
        self._count = count
        self._client = client
        self._owns_client = client is None
        self._queue: asyncio.Queue[Alert] | None = None
        self._task: asyncio.Task[None] | None = None

    def send(self, alert: Alert) -> bool:
        """Queue ``alert`` for delivery (the sender starts with the first); False when the queue is full."""
        config = self._config()
        if self._queue is None:
            self._queue = asyncio.Queue(maxsize=config.queue_size)
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run(), name="alert-webhook")
        try:
            self._queue.put_nowait(alert)
        except asyncio.QueueFull:
            log.error(
                "alert_dropped",
                kind=alert.kind,
                tenant=alert.tenant,
                name=alert.name,
                queued=config.queue_size,
            )
            self._count(alert.kind, "dropped")
            return False
        return True

    async def drain(self) -> None:
        """Wait until every queued alert was delivered or given up (tests, and a graceful stop)."""
        if self._queue is not None:
            await self._queue.join()

    async def aclose(self, timeout: float = 5.0) -> None:
        if self._task is not None and self._queue is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._queue.join(), timeout)
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._client is not None and self._owns_client:
            await self._client.aclose()

    async def _run(self) -> None:
        assert self._queue is not None
        while True:
            alert = await self._queue.get()
            try:
                await self.deliver(alert)
            except Exception:
                log.exception("alert_failed", kind=alert.kind, tenant=alert.tenant, name=alert.name)
                self._count(alert.kind, "failed")
            finally:
                self._queue.task_done()

    async def deliver(self, alert: Alert) -> bool:
        """POST ``alert`` until a 2xx answer or the attempts run out; True when it was delivered."""
        config = self._config()
        url = config.webhook_url
        if url is None:
            log.warning(
                "alert_not_sent", reason="alerts.webhook_url was unset", kind=alert.kind, tenant=alert.tenant
            )
            self._count(alert.kind, "failed")
            return False
        if self._client is None:
            self._client = httpx.AsyncClient()
        fields = {"kind": alert.kind, "tenant": alert.tenant, "period": alert.period, "name": alert.name}
        problem = ""
        for attempt in range(1, config.attempts + 1):
            try:
                answer = await self._client.post(
                    url, json=alert.payload(), headers=config.headers, timeout=config.timeout_seconds
                )
                if answer.is_success:
                    log.info("alert_delivered", attempt=attempt, status=answer.status_code, **fields)
                    self._count(alert.kind, "delivered")
                    return True
                problem = f"HTTP {answer.status_code}"
            except httpx.HTTPError as exc:
                problem = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            if attempt < config.attempts:
                wait = min(config.backoff_initial_seconds * 2 ** (attempt - 1), config.backoff_max_seconds)
                log.warning("alert_retry", attempt=attempt, problem=problem, wait_seconds=wait, **fields)
                self._count(alert.kind, "retried")
                await asyncio.sleep(wait)
        log.error("alert_failed", attempts=config.attempts, problem=problem, **fields)
        self._count(alert.kind, "failed")
        return False
