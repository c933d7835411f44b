"""API keys → tenants.

Keys are held only as sha256 digests. A presented key is hashed and the digest looked up: the time the
lookup takes depends on the digest, not on how much of a stored key the presented one shares, so it leaks
nothing an attacker can steer (the property a constant-time comparison exists to give), at O(1) per request
however many keys are configured.
"""

from __future__ import annotations

from collections.abc import Mapping

from gateway.base.errors import AuthenticationFailed
from gateway.base.types import Tenant
from gateway.config.schema.root import TenantConfig, hash_key

KEY_ID_LENGTH = 12


class KeyRing:
    def __init__(self, tenants: Mapping[str, TenantConfig]) -> None:
        self._by_digest: dict[str, tuple[str, tuple[tuple[str, str], ...]]] = {
            digest: (name, tags) for name, tenant in tenants.items() for digest, tags in tenant.key_tags()
        }

    def resolve(self, key: str | None) -> Tenant:
        if not key:
            raise AuthenticationFailed(
                "Missing API key: send it as 'Authorization: Bearer <key>' (or an api-key header)."
            )
        digest = hash_key(key)
        found = self._by_digest.get(digest)
        if found is None:
            raise AuthenticationFailed("Incorrect API key provided.")
        return Tenant(name=found[0], key_id=digest[:KEY_ID_LENGTH], tags=found[1])


def presented_key(headers: Mapping[str, str]) -> str | None:
    """The key from ``Authorization: Bearer``, ``api-key`` or ``x-api-key`` (lower-case header names)."""
    authorization = headers.get("authorization")
    if authorization:
        scheme, _, value = authorization.partition(" ")
        if scheme.lower() == "bearer" and value.strip():
            return value.strip()
        return None
    return headers.get("api-key") or headers.get("x-api-key")
