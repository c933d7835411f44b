"""The ``counting:`` section of the gateway config (pydantic, at the edge)."""

from __future__ import annotations

from decimal import Decimal
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

EncodingName = Literal["o200k_base", "cl100k_base"]


class ImageRuleConfig(BaseModel):
    """An image token rule for the models whose name matches ``match`` (a glob), ahead of the built-in
    family table: ``tile`` is ``base + per_tile`` per 512-px tile (``base`` alone for ``detail: low``);
    ``patch`` is 32-px patches capped at 1536, times ``multiplier``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    match: str = Field(min_length=1)
    kind: Literal["tile", "patch"]
    base: int = Field(default=0, ge=0)
    per_tile: int = Field(default=0, ge=0)
    multiplier: Decimal = Field(default=Decimal(1), gt=0, decimal_places=3)

    @model_validator(mode="after")
    def _complete(self) -> ImageRuleConfig:
        if self.kind == "tile" and self.per_tile == 0:
            raise ValueError("a tile rule needs per_tile > 0")
        return self


class CountingConfig(BaseModel):
    """How the gateway counts prompt tokens.

    ``default_encoding`` counts a model that neither the config nor the built-in name prefixes place; such
    a count is marked approximate.

    An image given by a remote URL is never fetched: it counts as an image of
    ``remote_image_width`` x ``remote_image_height`` pixels (default 1024 x 1024, which is 765 tokens at
    high detail on gpt-4o) at the detail the request asks for (``auto`` counts as ``high``), and the
    count is marked approximate. The same assumption covers a data URL whose header cannot be read.

    ``cache_entries`` bounds the LRU of per-message counts (0 turns it off); ``offload_bytes`` is the body
    size from which the async entry point counts in a worker thread instead of on the event loop.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    default_encoding: EncodingName = "o200k_base"
    remote_image_width: int = Field(default=1024, gt=0)
    remote_image_height: int = Field(default=1024, gt=0)
    cache_entries: int = Field(default=16_384, ge=0)
    offload_bytes: int = Field(default=64 * 1024, ge=0)
    image_rules: tuple[ImageRuleConfig, ...] = ()
