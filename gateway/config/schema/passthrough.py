"""The ``passthrough:`` section of the config: upstream paths forwarded as they are, and which of them reach
objects the provider keeps for its whole account."""

from __future__ import annotations

from decimal import Decimal
from typing import Literal

from pydantic import Field, field_validator

from gateway.config.schema.base import Strict

PASSTHROUGH_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
SHARED_OBJECTS = frozenset(
    {
        "assistants",
        "batches",
        "containers",
        "conversations",
        "evals",
        "files",
        "fine_tuning",
        "skills",
        "threads",
        "uploads",
        "vector_stores",
    }
)
"""First path segments of objects the provider keeps for its whole account, which every tenant using the
same provider key would share: a route to them must name the tenants granted them."""


class PassthroughRoute(Strict):
    """An upstream path the gateway forwards as it is, for the routes it does not serve itself."""

    path: str = Field(
        description="under /v1, e.g. /moderations; '*' matches one path segment, a final '/**' any number"
    )
    methods: tuple[Literal["GET", "POST", "PUT", "PATCH", "DELETE"], ...] = ("POST",)
    provider: str | None = Field(
        default=None, description="where to send it; unset: the provider of the JSON body's model"
    )
    tenants: tuple[str, ...] | None = Field(
        default=None, description="who may call it; unset: every tenant (not allowed for shared objects)"
    )
    hold_usd: Decimal = Field(
        default=Decimal(0),
        ge=0,
        decimal_places=6,
        description="the budget hold of one call, when the body's model does not price it",
    )
    price_usd: Decimal = Field(
        default=Decimal(0), ge=0, decimal_places=6, description="billed per call, on top of reported usage"
    )

    @field_validator("path")
    @classmethod
    def _pattern(cls, value: str) -> str:
        segments = value.strip("/").split("/")
        if not value.startswith("/") or not all(segments):
            raise ValueError("path must start with / and have no empty segments")
        if any(segment in (".", "..") or "%" in segment or "\\" in segment for segment in segments):
            raise ValueError("path must not hold dot segments, escapes or backslashes")
        if "**" in segments[:-1] or any("*" in s and s not in ("*", "**") for s in segments):
            raise ValueError("'*' must be a whole segment, and '**' only the last one")
        return "/" + "/".join(segments)

    @property
    def shared_objects(self) -> bool:
        """The entry can reach the provider's shared objects: its first segment names them, or is a
        wildcard (``/*``, ``/**``, ``/*/…``), which matches them among every other path."""
        return self.path.strip("/").split("/")[0] in (*SHARED_OBJECTS, "*", "**")
