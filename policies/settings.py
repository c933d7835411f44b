"""The knobs a transform needs, resolved for one policy and one model, as plain values.

The gateway maps them onto the compressors' own settings (``SummarySettings``, ``RetrievalSettings``).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Fallback(StrEnum):
    """What to do when a transform fails (e.g. the cheap model did not answer)."""

    RETRIEVE = "retrieve"
    """Retrieve the relevant chunks instead (compression failures only)."""
    FORWARD = "forward"
    """Forward the request as it stands, with a warning, if that keeps the invariant; else escalate."""
    REJECT = "reject"
    """Answer 503."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CompressSettings:
    cheap_model: str | None
    """The model that writes summaries; None: the requested model itself."""
    keep_recent_turns: int
    keep_recent_tokens: int | None
    target_tokens: int
    """The compressed request should count at most this (below the model's warning line)."""
    precompress_at: int | None
    """Prepare the summary in the background once a request reaches this many tokens."""
    chunk_tokens: int | None
    """Summarise in chunks of at most this many tokens; None: the compressor's default."""
    on_failure: Fallback


@dataclass(frozen=True, slots=True, kw_only=True)
class RetrieveSettings:
    chunk_tokens_min: int
    chunk_tokens_max: int
    overlap_tokens: int
    document_min_tokens: int
    """A content block of at least this many tokens is a document to cut into chunks."""
    budget_tokens: int
    """The whole retrieved request must count at most this (below the model's warning line)."""
    hybrid: bool
    embedding_model: str | None
    compress_history_share: float | None
    """Also compress old turns first when at least this share of the prompt is history; None: never."""
    on_failure: Fallback
