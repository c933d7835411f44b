"""API keys → tenants.

Keys are held only as sha256 digests. A presented key is hashed and the digest looked up: the time the
lookup takes depends on the digest, not on how much of a stored key the presented one shares, so it leaks
nothing an attacker can steer (the property a constant-time comparison exists to give), at O(1) per request
however many keys are configured.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Protocol

from gateway.base.echo import echoed
from gateway.base.errors import AuthenticationFailed, PermissionDenied
from gateway.base.types import Tenant
from gateway.config.schema.root import TenantConfig, hash_key

KEY_ID_LENGTH = 12


class ManagedLookup(Protocol):
    """Keys kept elsewhere than the config (``gateway.keys.live``), asked after the config's keys."""

    def resolve(self, digest: str) -> Tenant | None:
        """The caller, None for an unknown digest; AuthenticationFailed for a revoked or expired key."""


class KeyRing:
    def __init__(self, tenants: Mapping[str, TenantConfig]) -> None:
        self._by_digest: dict[str, tuple[str, tuple[tuple[str, str], ...]]] = {
            digest: (name, tags) for name, tenant in tenants.items() for digest, tags in tenant.key_tags()
        }
        self._tenant_tags = {name: tenant.tags for name, tenant in tenants.items()}

    def resolve(self, key: str | None, managed: ManagedLookup | None = None) -> Tenant:
        if not key:
            raise AuthenticationFailed(
                "Missing API key: send it as 'Authorization: Bearer <key>' (or an api-key header)."
            )
        digest = hash_key(key)
        found = self._by_digest.get(digest)
        if found is None:
            if managed is not None:
                return self._managed(managed, digest)
            raise AuthenticationFailed("Incorrect API key provided.")
        return Tenant(name=found[0], key_id=digest[:KEY_ID_LENGTH], tags=found[1])

    def _managed(self, managed: ManagedLookup, digest: str) -> Tenant:
        """A managed key's caller, its tenant's tags under the key's own (a tenant still configured)."""
        tenant = managed.resolve(digest)
        if tenant is None:
            raise AuthenticationFailed("Incorrect API key provided.")
        tenant_tags = self._tenant_tags.get(tenant.name)
        if tenant_tags is None:
            raise AuthenticationFailed("This API key's tenant is no longer configured.")
        if tenant_tags:
            tags = tuple(sorted({**tenant_tags, **dict(tenant.tags)}.items()))
            return replace(tenant, tags=tags)
        return tenant


def presented_key(headers: Mapping[str, str]) -> str | None:
    """The key from ``Authorization: Bearer``, ``api-key`` or ``x-api-key`` (lower-case header names)."""
    authorization = headers.get("authorization")
    if authorization:
        scheme, _, value = authorization.partition(" ")
        if scheme.lower() == "bearer" and value.strip():
            return value.strip()
        return None
    return headers.get("api-key") or headers.get("x-api-key")


def allow_model(tenant: Tenant, model: str) -> None:
    """Refuse (403) a model outside the key's allow-list, before anything is counted or sent."""
    if tenant.models is not None and model not in tenant.models:
        allowed = ", ".join(sorted(tenant.models)) or "none"
        raise PermissionDenied(
            f"This API key may not use the model '{echoed(model)}' (allowed: {allowed}).",
            param="model",
            code="model_not_allowed",
        )
