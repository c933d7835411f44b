"""Each process's copy of the managed keys, so that authenticating one stays a dict lookup in memory.

The copy follows Redis by polling: every ``keys.refresh_seconds`` (0.25 s by default) the process reads the
store's version counter (one GET) and, only when it moved, every record (one HGETALL). Polling rather than
pub/sub: a published message missed while a connection is being re-established is lost for good, so
pub/sub would need the poll behind it anyway; a subscription holds a connection per process and works
differently on a Redis Cluster (sharded channels); and four GETs a second per process cost Redis nothing.
A revoked key is therefore refused by every worker of every instance within ``refresh_seconds`` plus one
read. The process that made a change reads it at once (``refresh``), so its own next request sees it.

The copy also holds each key's budget and rate limits, parsed once per change, for the budget hold and the
rate limiter (``budget_of``, ``limits_of``).

While ``keys.managed`` is off the loop only looks at the setting every ``OFF_SECONDS`` (as often as the
config file is checked for changes by default): no Redis call, and authentication never looks here; a
reload that turns it on is followed within that long.
When Redis cannot be read, the last copy stays in force (a revocation made meanwhile waits for Redis).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable

import structlog
from redis.exceptions import RedisError

from gateway.base.errors import AuthenticationFailed
from gateway.base.types import Tenant
from gateway.config.rate_limits import Scoped, scoped_of
from gateway.config.schema.keys import KeysConfig
from gateway.config.schema.ledger import BudgetConfig
from gateway.config.schema.rate_limits import RateLimitsConfig
from gateway.keys.record import ManagedKey, iso
from gateway.keys.store import KeyStore

OFF_SECONDS = 2.0
"""How often a process whose ``keys.managed`` is off looks again (a wake-up costs an idle worker CPU)."""

_Entry = tuple[ManagedKey, Tenant, float | None]
"""The key, the caller it authenticates as, and when this secret stops working (a rotation's end)."""


class ManagedKeys:
    def __init__(
        self,
        store: KeyStore,
        *,
        settings: Callable[[], KeysConfig],
        clock: Callable[[], float] = time.time,
        off_seconds: float = OFF_SECONDS,
    ) -> None:
        self.store = store
        self._off_seconds = off_seconds
        self._settings = settings
        self._clock = clock
        self._by_digest: dict[str, _Entry] = {}
        self._budgets: dict[str, BudgetConfig] = {}
        self._limits: dict[str, Scoped] = {}
        self.version: int | None = None
        self._task: asyncio.Task[None] | None = None
        self._failing = False
        self._log = structlog.get_logger("gateway.keys")

    def resolve(self, digest: str) -> Tenant | None:
        """The caller of a secret with this sha256 digest; None: not a managed key's. A revoked or expired
        key, or a secret a rotation retired, raises AuthenticationFailed saying which."""
        found = self._by_digest.get(digest)
        if found is None:
            return None
        key, tenant, until = found
        now = self._clock()
        if key.revoked_at is not None:
            raise AuthenticationFailed("This API key was revoked.", code="api_key_revoked")
        if key.expires_at is not None and key.expires_at <= now:
            raise AuthenticationFailed(
                f"This API key expired at {iso(key.expires_at)}.", code="api_key_expired"
            )
        if until is not None and until <= now:
            raise AuthenticationFailed(
                f"This API key was rotated: this secret stopped working at {iso(until)}; use the new one.",
                code="api_key_rotated",
            )
        return tenant

    async def refresh(self) -> bool:
        """Read the keys again if their version moved; True when the copy changed."""
        version = await self.store.version()
        if version == self.version:
            return False
        version, keys = await self.store.load()
        if self.version is not None and version < self.version:
            return False  # a concurrent refresh (an admin route's) already read a newer state
        self._by_digest = {
            secret.digest: (key, _caller(key), secret.until) for key in keys for secret in key.secrets
        }
        self._budgets = {
            key.id: BudgetConfig.model_validate(key.budget) for key in keys if key.budget is not None
        }
        self._limits = {
            key.id: scoped_of(RateLimitsConfig.model_validate(key.rate_limits))
            for key in keys
            if key.rate_limits is not None
        }
        self.version = version
        return True

    def limits_of(self, key_id: str) -> Scoped | None:
        """The rate limits of a managed key by its id; None for a key without any."""
        return self._limits.get(key_id)

    def budget_of(self, key_id: str) -> BudgetConfig | None:
        """The budget of a managed key by its id; None for a key without one, or a config key."""
        return self._budgets.get(key_id)

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._follow(), name="managed_keys")

    async def aclose(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _follow(self) -> None:
        while True:
            settings = self._settings()
            if settings.managed:
                await self._poll()
                await asyncio.sleep(settings.refresh_seconds)
                continue
            if self.version is not None:  # switched off by a reload: forget them
                self._by_digest, self._budgets, self._limits, self.version = {}, {}, {}, None
            await asyncio.sleep(max(settings.refresh_seconds, self._off_seconds))

    async def _poll(self) -> None:
        try:
            await self.refresh()
        except (RedisError, OSError) as exc:
            if not self._failing:
                self._log.warning("managed_keys_unreadable", error=str(exc))
            self._failing = True
        else:
            if self._failing:
                self._log.info("managed_keys_readable", version=self.version)
            self._failing = False


def _caller(key: ManagedKey) -> Tenant:
    return Tenant(
        name=key.tenant,
        key_id=key.id,
        tags=key.tags,
        models=None if key.models is None else frozenset(key.models),
        managed=True,
    )
