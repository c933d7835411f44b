"""Managed API keys in Redis: create, read, rotate and revoke, each change atomic and counted.

==============================  ======  ===================================================================
key                             type    holds
==============================  ======  ===================================================================
gw:{:keys}:records              hash    key id → the key's record as JSON (``gateway.keys.record``)
gw:{:keys}:version              string  a counter raised by every change (the processes poll it)
==============================  ======  ===================================================================

Both share one hash tag, so on a Redis Cluster they live in one slot and one script changes them together:
a change is a compare-and-set (the record as it was read, the record as it shall be) that writes the record
and raises the version in the same step, so no process ever sees a new record under an old version, and
two admins rotating the same key at once cannot lose one rotation (the loser reads again and retries).
Every process reads all the records when the version moves (``gateway.keys.live``); records are small and
few (thousands at most), so that read is one ``HGETALL``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from redis.asyncio import Redis

from gateway.base.errors import InvalidRequest, NotFound
from gateway.keys.record import ManagedKey, Secret, new_id, new_secret
from gateway.ledger.script import Script

SAVE = Script(
    """
-- KEYS: 1 records hash, 2 version counter; ARGV: 1 id, 2 the record as read ('' = none), 3 the new record.
-- Returns the new version, or 0 when the record is no longer what was read (nothing written).
if (redis.call('HGET', KEYS[1], ARGV[1]) or '') ~= ARGV[2] then
  return 0
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
return redis.call('INCR', KEYS[2])
"""
)

ATTEMPTS = 16
"""Compare-and-set attempts before a change gives up (only as many concurrent changes of one key can
make it retry)."""


class KeyNames:
    def __init__(self, prefix: str = "gw") -> None:
        self.records = f"{prefix}:{{:keys}}:records"
        self.version = f"{prefix}:{{:keys}}:version"


class KeyStore:
    def __init__(self, redis: Redis, *, prefix: str = "gw") -> None:
        self._redis = redis
        self.names = KeyNames(prefix)

    async def version(self) -> int:
        raw = await self._redis.get(self.names.version)
        return int(raw or 0)

    async def load(self) -> tuple[int, list[ManagedKey]]:
        """The version, then every record: read in that order, a change in between shows at the next poll."""
        version = await self.version()
        raw = await self._redis.hgetall(self.names.records)
        return version, [ManagedKey.from_json(value) for value in raw.values()]

    async def get(self, key_id: str) -> ManagedKey:
        raw = await self._redis.hget(self.names.records, key_id)
        if raw is None:
            raise NotFound(f"No API key with id '{key_id[:40]}'.", param="id", code="key_not_found")
        return ManagedKey.from_json(raw)

    async def list(self, tenant: str | None = None) -> list[ManagedKey]:
        _, found = await self.load()
        chosen = [key for key in found if tenant is None or key.tenant == tenant]
        return sorted(chosen, key=lambda key: (key.created_at, key.id))

    async def create(
        self,
        *,
        tenant: str,
        name: str,
        now: float,
        expires_at: float | None = None,
        models: tuple[str, ...] | None = None,
        tags: tuple[tuple[str, str], ...] = (),
        budget: dict[str, Any] | None = None,
        rate_limits: dict[str, Any] | None = None,
    ) -> tuple[ManagedKey, str]:
        """The new key and its secret (shown once: only its digest is kept)."""
        secret, digest = new_secret()
        for _ in range(ATTEMPTS):
            key = ManagedKey(
                id=new_id(),
                tenant=tenant,
                name=name,
                created_at=now,
                secrets=(Secret(digest, now),),
                expires_at=expires_at,
                models=models,
                tags=tags,
                budget=budget,
                rate_limits=rate_limits,
            )
            if await self._save(key.id, "", key.to_json()):
                return key, secret
        raise RuntimeError("no free key id found")  # 16 collisions in 2**32 ids: not by chance

    async def rotate(self, key_id: str, *, now: float, overlap_seconds: float) -> tuple[ManagedKey, str]:
        """A new secret for the key; its current secrets keep working for ``overlap_seconds``."""
        secret, digest = new_secret()

        def change(key: ManagedKey) -> ManagedKey:
            if key.status(now) != "active":
                raise InvalidRequest(
                    f"The API key '{key.id}' is {key.status(now)}: it cannot be rotated.",
                    code="key_not_active",
                )
            return key.rotated(digest, now=now, overlap_seconds=overlap_seconds)

        return await self._change(key_id, change), secret

    async def revoke(self, key_id: str, *, now: float) -> ManagedKey:
        """Refused from now on, everywhere; revoking a revoked key changes nothing."""
        return await self._change(
            key_id, lambda key: key if key.revoked_at is not None else replace(key, revoked_at=now)
        )

    async def _change(self, key_id: str, change: Callable[[ManagedKey], ManagedKey]) -> ManagedKey:
        for _ in range(ATTEMPTS):
            raw = await self._redis.hget(self.names.records, key_id)
            if raw is None:
                raise NotFound(f"No API key with id '{key_id[:40]}'.", param="id", code="key_not_found")
            before = ManagedKey.from_json(raw)
            after = change(before)
            if after is before or await self._save(key_id, _text(raw), after.to_json()):
                return after
        raise RuntimeError(f"the API key {key_id} kept changing while it was being changed")

    async def _save(self, key_id: str, before: str, after: bytes) -> bool:
        names = [self.names.records, self.names.version]
        version = await SAVE.run(self._redis, names, [key_id, before, after.decode()])
        return bool(version)


def _text(raw: bytes | str) -> str:
    return raw.decode() if isinstance(raw, bytes) else raw
