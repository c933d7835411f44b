"""What summary compression returns to the gateway."""

from __future__ import annotations

from dataclasses import dataclass

from compressors.protocols import Message


@dataclass(frozen=True, slots=True)
class SummaryResult:
    """The compressed request. The messages not summarised are the request's own objects, not copies."""

    messages: list[Message]
    tokens_before: int
    tokens_after: int
    """``TokenCounter.count_messages(messages)``."""
    summarized: range | None
    """Positions in the request from the first to the last summarised message (None: nothing was);
    system messages and the last user message inside it stay verbatim."""
    summarized_count: int
    """How many of the request's messages the summary replaces."""
    cache_hit: bool
    """The summary came from the cache (written by an earlier turn, a precompute or a concurrent request)."""
    calls_made: int
    """Cheap-model calls made for this result (each one priced by the gateway's Completer)."""


@dataclass(frozen=True, slots=True)
class Precomputed:
    """What a background precompute did."""

    summarized_blocks: int
    """How many blocks the summary now in the cache covers (0: nothing old to summarise)."""
    cache_hit: bool
    calls_made: int
