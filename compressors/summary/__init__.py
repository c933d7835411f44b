"""Summary compression: the oldest turns become one summary written by a cheap model, cached per prefix.

Read in this order: ``settings`` (what the gateway configures), ``selection`` (what stays verbatim),
``keys`` (how a prefix is named in the cache), ``transcript`` and ``prompt`` (what the cheap model sees
and how its answer is checked), ``summarizer`` (calls, retry, chunked map-reduce), ``store`` (cache
entries, the prefix index), ``assembly`` (the new message list) and ``compressor``
(``SummarizeOldTurns``, the orchestration, single flight through ``compressors.flight``).
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
