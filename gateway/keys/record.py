"""One managed API key as it is stored: who it belongs to, what it may do, and the digests of its secrets.

A key has one id for its whole life (``key_`` and 8 hex digits: as long as the config keys' ids, so it names
the key in cost events, logs and rate limits alike) and one or more secrets: a rotation adds a new secret and
gives the old ones an end (``until``), so both work during the overlap. Secrets are held only as sha256
digests; the secret itself is shown once, when it is made.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

import orjson

from gateway.base.types import MANAGED_KEY_PREFIX
from gateway.config.schema.tenants import hash_key

SECRET_PREFIX = "sk-gw-"


@dataclass(frozen=True, slots=True)
class Secret:
    digest: str
    created_at: float
    until: float | None = None
    """When a rotation retires it (epoch seconds); None: as long as the key lives."""


@dataclass(frozen=True, slots=True)
class ManagedKey:
    id: str
    tenant: str
    name: str
    created_at: float
    secrets: tuple[Secret, ...]
    expires_at: float | None = None
    revoked_at: float | None = None
    models: tuple[str, ...] | None = None
    tags: tuple[tuple[str, str], ...] = ()
    budget: dict[str, Any] | None = None
    """A ``BudgetConfig`` as JSON data (daily_usd, monthly_usd, hard, ...)."""
    rate_limits: dict[str, Any] | None = None
    """A ``rate_limits`` block as JSON data (the schema of a config key's ``rate_limits``)."""

    def status(self, now: float) -> str:
        if self.revoked_at is not None:
            return "revoked"
        if self.expires_at is not None and self.expires_at <= now:
            return "expired"
        return "active"

    def rotated(self, secret_digest: str, *, now: float, overlap_seconds: float) -> ManagedKey:
        """With a new secret; the current ones end after ``overlap_seconds``, ended ones are dropped."""
        end = now + overlap_seconds
        kept = tuple(
            replace(each, until=end if each.until is None else min(each.until, end))
            for each in self.secrets
            if each.until is None or each.until > now
        )
        return replace(self, secrets=(*kept, Secret(secret_digest, now)))

    def to_json(self) -> bytes:
        data = {
            "id": self.id,
            "tenant": self.tenant,
            "name": self.name,
            "created_at": self.created_at,
            "secrets": [[each.digest, each.created_at, each.until] for each in self.secrets],
            "expires_at": self.expires_at,
            "revoked_at": self.revoked_at,
            "models": None if self.models is None else list(self.models),
            "tags": dict(self.tags),
            "budget": self.budget,
            "rate_limits": self.rate_limits,
        }
        return orjson.dumps(data)

    @classmethod
    def from_json(cls, raw: bytes | str) -> ManagedKey:
        data = orjson.loads(raw)
        models = data.get("models")
        return cls(
            id=data["id"],
            tenant=data["tenant"],
            name=data["name"],
            created_at=data["created_at"],
            secrets=tuple(Secret(digest, created, until) for digest, created, until in data["secrets"]),
            expires_at=data.get("expires_at"),
            revoked_at=data.get("revoked_at"),
            models=None if models is None else tuple(models),
            tags=tuple(sorted(data.get("tags", {}).items())),
            budget=data.get("budget"),
            rate_limits=data.get("rate_limits"),
        )

    def public(self, now: float) -> dict[str, Any]:
        """What the admin API and the CLI show: never a secret nor a digest."""
        return {
            "id": self.id,
            "object": "api_key",
            "tenant": self.tenant,
            "name": self.name,
            "status": self.status(now),
            "created_at": iso(self.created_at),
            "expires_at": iso(self.expires_at),
            "revoked_at": iso(self.revoked_at),
            "models": None if self.models is None else list(self.models),
            "tags": dict(self.tags),
            "budget": self.budget,
            "rate_limits": self.rate_limits,
            "secrets": [
                {"created_at": iso(each.created_at), "until": iso(each.until)}
                for each in self.secrets
                if each.until is None or each.until > now
            ],
        }


def new_id() -> str:
    return f"{MANAGED_KEY_PREFIX}{secrets.token_hex(4)}"


def new_secret() -> tuple[str, str]:
    """A new secret and its digest."""
    secret = SECRET_PREFIX + secrets.token_urlsafe(32)
    return secret, hash_key(secret)


def iso(at: float | None) -> str | None:
    if at is None:
        return None
    return datetime.fromtimestamp(at, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
