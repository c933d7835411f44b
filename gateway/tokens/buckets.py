"""Context-length buckets: half-open token ranges ``[low, high)`` from the configured upper edges, plus an
overflow bucket from the last edge up (shown only when something falls in it)."""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Bucket:
    index: int
    low: int
    high: int | None
    """Exclusive; None for the overflow bucket."""

    @property
    def label(self) -> str:
        if self.high is None:
            return f"{tokens_label(self.low)}+"
        return f"{tokens_label(self.low)}-{tokens_label(self.high)}"

    def contains(self, tokens: int) -> bool:
        return tokens >= self.low and (self.high is None or tokens < self.high)


def buckets_for(edges: Sequence[int]) -> tuple[Bucket, ...]:
    lows = (0, *edges)
    highs: tuple[int | None, ...] = (*edges, None)
    return tuple(Bucket(index, low, high) for index, (low, high) in enumerate(zip(lows, highs, strict=True)))


def bucket_index(tokens: int, edges: Sequence[int]) -> int:
    """The index into ``buckets_for(edges)`` of the bucket holding ``tokens``."""
    return bisect.bisect_right(edges, tokens)


def bucket_low(tokens: int, edges: Sequence[int]) -> int:
    """The ``low`` of the bucket holding ``tokens`` (what per-bucket counters are keyed by)."""
    index = bucket_index(tokens, edges)
    return edges[index - 1] if index else 0


def tokens_label(tokens: int) -> str:
    """``8K``, ``250K``, ``1M``, ``1.5M``, ``500``: the short form of a token count."""
    if tokens >= 1_000_000 and tokens % 100_000 == 0:
        return f"{tokens / 1_000_000:g}M"
    if tokens >= 1_000 and tokens % 1_000 == 0:
        return f"{tokens // 1_000}K"
    if tokens >= 1_000:
        return f"{tokens / 1_000:.1f}K"
    return str(tokens)


def size_label(tokens: float) -> str:
    """About that many tokens, to three significant figures (``179K``, ``4.14K``, ``1.23M``): for means
    and medians, where ``tokens_label``'s exact form (``179.0K``) would claim a precision they lack."""
    if tokens >= 999_500:
        return f"{tokens / 1_000_000:.3g}M"
    if tokens >= 999.5:
        return f"{tokens / 1_000:.3g}K"
    return f"{tokens:.0f}"


def parse_tokens(text: str) -> int:
    """``8k`` -> 8000, ``1.5M`` -> 1500000, ``256000`` -> 256000."""
    value = text.strip().lower().replace("_", "")
    for suffix, factor in (("k", 1_000), ("m", 1_000_000)):
        if value.endswith(suffix):
            return round(float(value[:-1]) * factor)
    return int(value)
