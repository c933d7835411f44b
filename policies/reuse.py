"""How long a compacted conversation keeps its cached prefix before its compaction is extended.

Reusing the prefix costs the turns that pile up after it, at the cached price, on every turn; extending
it costs one rewrite sent uncached (what the summary model reads, it reads either way, sooner or later).
That is the economic order quantity: with growth g a turn, a fresh compaction of s tokens, input price p
and cached price c, the cost per turn is least when the compaction is extended once the pile after it
reaches sqrt(2 s g (p - c) / c). A slow chat is extended every few turns; a fast tool loop, whose
rewrites cost the same but whose pile grows faster, less often relative to its growth; neither is
rewritten every turn, nor carried to the cliff.
"""

from __future__ import annotations

import math

from policies.bands import ModelBands
from policies.facts import CacheFacts, ModelFacts
from policies.prices import SUMMARY_ALLOWANCE
from policies.settings import CompressSettings, Timing


def compacted_size(settings: CompressSettings) -> int:
    """What a fresh compaction is expected to send: the verbatim aim, the pins, the recall and a summary
    (at most the target)."""
    aim = settings.keep_recent_tokens or settings.target_tokens
    expected = aim + settings.pinned_tokens + settings.recall_tokens + SUMMARY_ALLOWANCE
    return min(settings.target_tokens, expected)


def reuse_limit(
    settings: CompressSettings, bands: ModelBands, model: ModelFacts | None, cache: CacheFacts | None
) -> int | None:
    """The most tokens a compacted request may count and still be reused as it is (between the target
    and the cliff), or None when the growth or the prices do not say (the compressor then reuses up to
    ``accept_tokens``). Only the deferred timing weighs the cache; eager reuses up to the target."""
    growth = cache.growth_tokens if cache is not None else None
    if settings.timing is not Timing.DEFERRED or growth is None or growth <= 0 or model is None:
        return None
    price, cached = model.input_price, model.cached_input_price
    if price is None or not cached or cached >= price:
        return None
    size = compacted_size(settings)
    pile = math.sqrt(2 * size * growth * (price - cached) / cached)
    return max(settings.target_tokens, min(bands.cliff, int(size + pile)))
