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
    system messages and the user messages kept verbatim inside it stay in place."""
    summarized_count: int
    """How many of the request's messages the summary parts replace."""
    cache_hit: bool
    """The summary came from the cache (written by an earlier turn, a precompute or a concurrent request)."""
    calls_made: int
    """Cheap-model calls made for this result (each one priced by the gateway's Completer)."""
    reused: bool = False
    """A cached compaction was sent as it is, nothing written (its prefix is the one sent before)."""
    parts: int = 0
    """Summary messages in the request."""
    pinned: int = 0
    """Messages of the user quoted verbatim in the summary messages."""
    recalled_chunks: int = 0
    """Chunks of the summarised turns recalled for the latest request (0: no recall message)."""
    excerpted: int = 0
    """Tool outputs of the verbatim part cut to head/tail excerpts by the cap."""


@dataclass(frozen=True, slots=True)
class Precomputed:
    """What a background precompute did."""

    summarized_blocks: int
    """How many blocks the compaction now in the cache covers (0: nothing old to summarise)."""
    cache_hit: bool
    calls_made: int
