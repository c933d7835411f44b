"""Summary compression: the oldest turns become summary parts written by a cheap model, cached per
prefix and reused byte for byte, with the user's own words pinned and the details recalled on demand.

Read in this order: ``settings`` (what the gateway configures), ``selection`` (what stays verbatim:
the aim, the floor), ``excerpts`` (the cap: tool outputs cut to head and tail), ``keys`` (how a prefix
is named in the cache), ``transcript`` and ``prompt`` (what the cheap model sees and how its answer is
checked), ``summarizer`` (calls, retry, chunked map-reduce, merges), ``pins`` (the user's words quoted
verbatim), ``store`` (cached compactions and their parts, the prefix index), ``assembly`` (the summary
messages in the message list), ``compaction`` (laying out a cached compaction; writing a first part,
appending one, rolling them up), ``recall`` (excerpts of the summarised turns for the latest question)
and ``compressor`` (``SummarizeOldTurns``, the orchestration, single flight through
``compressors.flight``).

A compacted request, laid out (positions are the client's, 1-based in the text)::

    system                          verbatim
    [Summary … (messages 2-40) …]   part 1: pinned quotes, then the cheap model's summary
    [Summary … (messages 41-90, continued: part 2) …]   appended later; part 1 unchanged
    recent blocks                   verbatim; the oldest tool outputs cut to excerpts over the cap
    [Excerpts recalled …]           the summarised turns the latest request asks about
    latest user message             verbatim (for an agent's loop, the recall goes last instead)
"""

from __future__ import annotations

from compressors.summary.compressor import SummarizeOldTurns
from compressors.summary.errors import CannotCompress, SummaryError, SummaryFailed
from compressors.summary.result import Precomputed, SummaryResult
from compressors.summary.settings import SummarySettings

__all__ = [
    "CannotCompress",
    "Precomputed",
    "SummarizeOldTurns",
    "SummaryError",
    "SummaryFailed",
    "SummaryResult",
    "SummarySettings",
]
