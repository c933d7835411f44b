"""A tenant's exact response cache in the config (``tenants.<name>.response_cache``): how long an answer is
kept, how large one may be, how many a tenant keeps, and which requests may be answered from it
(``gateway.responsecache``). Absent: the tenant's requests never touch the cache."""

from __future__ import annotations

from pydantic import Field

from gateway.config.schema.base import Strict


class ResponseCacheConfig(Strict):
    ttl_seconds: int = Field(
        default=3_600, ge=1, le=30 * 24 * 3_600, description="how long a stored answer may be served"
    )
    max_entry_bytes: int = Field(
        default=256 * 1024,
        ge=1_024,
        le=16 * 1024 * 1024,
        description="a larger answer (its stored JSON) is not stored",
    )
    max_entries: int = Field(
        default=10_000,
        ge=1,
        description="answers the tenant keeps at most; storing one more drops the oldest stored",
    )
    deterministic_only: bool = Field(
        default=False,
        description="only requests with temperature 0 or a seed are answered from or stored in the cache",
    )
