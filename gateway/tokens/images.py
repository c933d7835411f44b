"""Image tokens as OpenAI bills them, by model family.

Tile models (gpt-4o, gpt-4.1, gpt-5, o1, o3, gpt-4o-mini): ``detail: low`` costs ``base``; ``high`` (and
``auto``, counted as ``high`` because that is the upper of the two) first scales the image down to fit a
2048 x 2048 square, then down so that its shortest side is at most 768 px (images are never scaled up),
rounding pixel sizes down after each step, and costs ``base + per_tile`` for each 512-px tile that covers
it: gpt-4o 1024 x 1024 -> 765, 2048 x 4096 -> 1105.

Patch models (gpt-4.1-mini/nano, o4-mini, gpt-5-mini/nano): 32-px patches; above 1536 patches the image
is scaled down as OpenAI's vision guide describes (by sqrt(32*32*1536 / (w*h)), then shrunk further so a
whole number of patches covers the tighter side), the count is capped at 1536 and multiplied by the
family's multiplier, rounded up. ``detail`` does not apply to patch models.

Later models (gpt-5.1 to gpt-5.5 and their mini/nano) fall under the nearest documented family by name
(``gpt-5*``: 70 + 140) until OpenAI documents them; ``counting.image_rules`` in the config overrides any
family without a code change.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from fnmatch import fnmatchcase
from typing import Any

from gateway.config.schema.counting import ImageRuleConfig
from gateway.tokens.encodings import base_name
from gateway.tokens.imagesize import data_url_size

_FIT = 2048
_SHORT_SIDE = 768
_TILE = 512
_PATCH = 32
_MAX_PATCHES = 1536
_EPSILON = 1e-6


@dataclass(frozen=True, slots=True)
class TileRule:
    base: int
    per_tile: int

    def tokens(self, width: int, height: int, detail: str) -> int:
        if detail == "low":
            return self.base
        if max(width, height) > _FIT:
            longest = max(width, height)
            width, height = max(1, width * _FIT // longest), max(1, height * _FIT // longest)
        if min(width, height) > _SHORT_SIDE:
            shortest = min(width, height)
            width, height = width * _SHORT_SIDE // shortest, height * _SHORT_SIDE // shortest
        tiles = -(-width // _TILE) * -(-height // _TILE)
        return self.base + self.per_tile * tiles

    @property
    def max_tokens(self) -> int:
        """No image costs more: after scaling, at most 4 x 2 tiles cover it."""
        return self.base + self.per_tile * (_FIT // _TILE) * -(-_SHORT_SIDE // _TILE)


@dataclass(frozen=True, slots=True)
class PatchRule:
    multiplier: Decimal

    def tokens(self, width: int, height: int, detail: str) -> int:
        return math.ceil(patches(width, height) * self.multiplier)

    @property
    def max_tokens(self) -> int:
        return math.ceil(_MAX_PATCHES * self.multiplier)


ImageRule = TileRule | PatchRule


def patches(width: int, height: int) -> int:
    """32-px patches covering the image, after the downscale that keeps them at most 1536."""
    raw = -(-width // _PATCH) * -(-height // _PATCH)
    if raw <= _MAX_PATCHES:
        return raw
    ratio = math.sqrt(_PATCH * _PATCH * _MAX_PATCHES / (width * height))
    across, down = width * ratio / _PATCH, height * ratio / _PATCH
    ratio *= min(max(1, math.floor(across)) / across, max(1, math.floor(down)) / down)
    scaled = math.ceil(width * ratio / _PATCH - _EPSILON) * math.ceil(height * ratio / _PATCH - _EPSILON)
    return min(scaled, _MAX_PATCHES)


FAMILY_RULES: tuple[tuple[tuple[str, ...], ImageRule], ...] = (
    (("gpt-4o-mini*",), TileRule(base=2833, per_tile=5667)),
    (("gpt-4.1-mini*", "gpt-5-mini*"), PatchRule(Decimal("1.62"))),
    (("gpt-4.1-nano*", "gpt-5-nano*"), PatchRule(Decimal("2.46"))),
    (("o4-mini*",), PatchRule(Decimal("1.72"))),
    (("gpt-5*",), TileRule(base=70, per_tile=140)),
    (("o1", "o1-*", "o3", "o3-*"), TileRule(base=75, per_tile=150)),
)
"""Globs on the model's base name, first match wins; anything else counts as gpt-4o (85 + 170)."""

DEFAULT_RULE = TileRule(base=85, per_tile=170)


def rule_for(names: Iterable[str], *, overrides: tuple[ImageRuleConfig, ...] = ()) -> ImageRule:
    """The image rule of the first of ``names`` that a configured or built-in rule matches."""
    bases = [base_name(name) for name in names]
    for override in overrides:
        pattern = override.match.lower()
        if any(fnmatchcase(name, pattern) for name in bases):
            if override.kind == "tile":
                return TileRule(base=override.base, per_tile=override.per_tile)
            return PatchRule(override.multiplier)
    for name in bases:
        for patterns, rule in FAMILY_RULES:
            if any(fnmatchcase(name, pattern) for pattern in patterns):
                return rule
    return DEFAULT_RULE


@dataclass(frozen=True, slots=True)
class ImageCount:
    tokens: int
    approximate: bool


def image_part_tokens(image_url: Any, rule: ImageRule, *, assumed_size: tuple[int, int]) -> ImageCount:
    """Tokens of one ``image_url`` content part value (``{"url", "detail"}`` or a bare URL string).

    A data URL is measured from its header; a remote URL, or a header that cannot be read, counts as
    ``assumed_size`` and is approximate.
    """
    if isinstance(image_url, Mapping):
        url, detail = image_url.get("url"), image_url.get("detail")
    else:
        url, detail = image_url, None
    detail = detail if detail in ("low", "high") else "high"
    size = data_url_size(url) if isinstance(url, str) else None
    if size is None:
        return ImageCount(tokens=rule.tokens(*assumed_size, detail), approximate=True)
    return ImageCount(tokens=rule.tokens(*size, detail), approximate=False)
