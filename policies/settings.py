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


class Exhausted(StrEnum):
    """What to do with a request still over the cliff once every transform has run or failed."""

    FORWARD = "forward"
    """Send it as it stands when it fits the model's context window, with a warning; the ledger records
    the tier it lands in. Over the window it is rejected all the same."""
    REJECT = "reject"
    """Answer 400 ``context_length_exceeded`` (or 503 when a transform failed for a passing reason)."""


class Timing(StrEnum):
    """When the warning band compresses."""

    DEFERRED = "deferred"
    """Forward while the provider's cache is warm and the request stays under the cliff (the summary is
    prepared meanwhile); compress the request that crosses, or when the cache has gone cold anyway."""
    EAGER = "eager"
    """Compress every request in the warning band (the behaviour before the cache was counted)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CompressSettings:
    cheap_model: str | None
    """The model that writes summaries; None: the requested model itself."""
    keep_recent_turns: int
    """The floor: at least this many recent turns stay verbatim."""
    keep_recent_tokens: int | None
    """The aim: the recent blocks that fit in this many tokens stay verbatim."""
    target_tokens: int
    """A fresh compaction aims at most at this many tokens (below the model's warning line)."""
    precompress_at: int | None
    """Prepare the summary in the background once a request reaches this many tokens."""
    chunk_tokens: int | None
    """Summarise in chunks of at most this many tokens; None: the compressor's default."""
    on_failure: Fallback
    timing: Timing = Timing.DEFERRED
    keep_recent_max_tokens: int | None = None
    """The cap: over it, the oldest tool outputs of the verbatim part are shrunk to excerpts."""
    accept_tokens: int = 0
    """A compressed request of at most this many tokens is sent as it is (a compacted prefix reused
    turn after turn): the cliff when deferred, the target when eager."""
    reuse_tokens: int = 0
    """A compacted conversation's prefix is reused while its request counts at most this many tokens,
    then extended; set per request from the conversation's growth (``actions.compress.reuse_limit``),
    0: ``accept_tokens``."""
    pinned_tokens: int = 0
    """Budget for the user's own words kept verbatim in a compacted request (0: none)."""
    pin_max_tokens: int = 1_000
    """A user message up to this long is pinned whole; of a longer one, the user's own words (not what
    they pasted) up to this long."""
    recall_tokens: int = 0
    """Budget for excerpts of the summarised turns recalled for the latest question (0: none)."""
    recall_on_tool_steps: bool = False
    """Recall also when the newest step is tool outputs the model is about to read."""
    client_compaction: tuple[str, ...] = ()
    """Phrases (lower case) that mark a client's own request to summarise the conversation."""
    precompress_max_usd: float | None = None
    """What background pre-compression may spend on one conversation (USD); None: no cap."""
    compact_early: bool = False
    """Deferred timing: a warm conversation growing turn after turn is compacted below the warning line
    once its pile pays for the rewrite (``actions.early``); a compacted one keeps its compaction there."""


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
