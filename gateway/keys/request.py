"""What a request to create or rotate a managed key may say (pydantic, at the edge), checked against the
config in force: the tenant must be configured, the allowed models served, the tags valid as any key's."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, TypeVar

import orjson
from pydantic import BaseModel, Field, ValidationError, field_validator

from gateway.base.errors import InvalidRequest
from gateway.config.schema.base import Strict
from gateway.config.schema.ledger import BudgetConfig
from gateway.config.schema.rate_limits import RateLimitsConfig
from gateway.config.schema.root import GatewayConfig
from gateway.config.schema.tenants import _checked_tags, key_limits
from gateway.keys.record import ManagedKey
from gateway.keys.store import KeyStore

MAX_BODY_BYTES = 64 * 1024

M = TypeVar("M", bound=Strict)


class NewKey(Strict):
    tenant: str = Field(min_length=1, description="a tenant of the config")
    name: str = Field(min_length=1, max_length=200, description="what the key is for, shown in lists")
    expires_at: datetime | None = Field(
        default=None, description="ISO 8601; without a zone, UTC. Refused from then on (401)"
    )
    budget: BudgetConfig | None = Field(default=None, description="as a tenant's budget, for this key alone")
    models: tuple[str, ...] | None = Field(
        default=None, description="the models the key may ask for; unset: every model the tenant may"
    )
    rate_limits: RateLimitsConfig | None = Field(
        default=None, description="as a key's rate_limits in the config (on_redis_down is the tenant's)"
    )
    tags: dict[str, str] = Field(default_factory=dict, description="default cost tags of the key's requests")

    _tags = field_validator("tags")(_checked_tags)
    _limits = field_validator("rate_limits")(key_limits)

    def expiry(self) -> float | None:
        if self.expires_at is None:
            return None
        at = self.expires_at if self.expires_at.tzinfo else self.expires_at.replace(tzinfo=UTC)
        return at.timestamp()


class Rotation(Strict):
    overlap_seconds: int | None = Field(
        default=None, ge=0, le=366 * 86_400, description="how long the old secret keeps working"
    )


def new_key_of(raw: bytes, config: GatewayConfig, *, now: float) -> NewKey:
    """The request's key, or InvalidRequest (400) saying what is wrong with it."""
    key = _parsed(NewKey, raw)
    if key.tenant not in config.tenants:
        raise InvalidRequest(f"Unknown tenant '{key.tenant[:80]}'.", param="tenant", code="unknown_tenant")
    unknown = [model for model in key.models or () if model not in config.models]
    if unknown:
        raise InvalidRequest(
            f"Unknown models in the allow-list: {', '.join(unknown)}.", param="models", code="unknown_model"
        )
    limited = [
        model for model in (key.rate_limits.models if key.rate_limits else {}) if model not in config.models
    ]
    if limited:
        raise InvalidRequest(
            f"Unknown models in rate_limits.models: {', '.join(limited)}.",
            param="rate_limits",
            code="unknown_model",
        )
    expiry = key.expiry()
    if expiry is not None and expiry <= now:
        raise InvalidRequest("expires_at is in the past.", param="expires_at")
    return key


async def create_key(store: KeyStore, asked: NewKey, *, now: float) -> tuple[ManagedKey, str]:
    """The key a checked request asks for, stored; with its secret (shown once)."""
    return await store.create(
        tenant=asked.tenant,
        name=asked.name,
        now=now,
        expires_at=asked.expiry(),
        models=asked.models,
        tags=tuple(sorted(asked.tags.items())),
        budget=_json(asked.budget),
        rate_limits=_json(asked.rate_limits),
    )


def _json(block: BaseModel | None) -> dict[str, Any] | None:
    return None if block is None else block.model_dump(mode="json", exclude_none=True)


def rotation_of(raw: bytes) -> Rotation:
    return _parsed(Rotation, raw) if raw.strip() else Rotation()


def _parsed(model: type[M], raw: bytes) -> M:
    if len(raw) > MAX_BODY_BYTES:
        raise InvalidRequest(f"The body is more than {MAX_BODY_BYTES:,} bytes.", code="request_too_large")
    try:
        return model.model_validate(orjson.loads(raw))
    except orjson.JSONDecodeError as exc:
        raise InvalidRequest(f"The body is not JSON: {exc}", code="invalid_json") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or None
        problem = f"{where}: {first['msg']}" if where else first["msg"]
        raise InvalidRequest(f"Invalid key request: {problem}", param=where) from None
