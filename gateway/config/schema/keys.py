"""``keys:`` in the config: whether API keys may also be managed through the admin API and the CLI (kept in
Redis), beside the tenants' keys in this file. Off by default: a gateway without managed keys does no work
for them at all (no polling, no lookups)."""

from __future__ import annotations

from pydantic import Field

from gateway.config.schema.base import Strict


class KeysConfig(Strict):
    managed: bool = Field(
        default=False,
        description="accept keys created with POST /admin/keys or `gateway keys create` (kept hashed in "
        "Redis), after the tenants' keys in this file",
    )
    refresh_seconds: float = Field(
        default=0.25,
        gt=0,
        le=1,
        description="how often each gateway process asks Redis whether the managed keys changed (one GET of "
        "a version counter); a revoked key is refused everywhere within about this long",
    )
    rotation_overlap_seconds: int = Field(
        default=86_400,
        ge=0,
        description="how long a rotated key's old secret keeps working when the rotation does not say",
    )
