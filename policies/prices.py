"""What a decision weighs in dollars: a request sent with or without its cache, and the summary calls.

A compaction costs more than the request it sends: the cheap model reads everything it summarises (in
chunks of about ``SUMMARY_CHUNK_TOKENS``) and writes up to ``SUMMARY_ALLOWANCE`` tokens per call, and
the compacted request goes uncached. A choice that leaves those calls out (as the first cost model did:
"compress $0.07" for a turn whose summary calls cost three times that) compacts when it does not pay.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from policies.facts import ModelFacts

SUMMARY_ALLOWANCE = 4_000
"""Tokens a compaction's summary text is assumed to take (the compressor's summary_max_tokens): what one
cheap call writes at most, and what a fresh compaction's summary counts in the request."""
SUMMARY_CHUNK_TOKENS = 48_000
"""What one cheap call reads at most (the compressor's default chunk)."""


@dataclass(frozen=True, slots=True)
class Prices:
    """USD per token."""

    input: float
    cached: float
    cheap_input: float
    cheap_output: float

    def sent(self, tokens: int, cached: int = 0) -> float:
        """A prompt of ``tokens`` of which ``cached`` are served from the provider's cache."""
        cached = max(0, min(cached, tokens))
        return (tokens - cached) * self.input + cached * self.cached

    def summary(self, read_tokens: int) -> float:
        """The cheap calls that summarise ``read_tokens``: reading them, and writing a summary per call."""
        if read_tokens <= 0:
            return 0.0
        calls = math.ceil(read_tokens / SUMMARY_CHUNK_TOKENS)
        return read_tokens * self.cheap_input + calls * SUMMARY_ALLOWANCE * self.cheap_output


def prices_of(models: Mapping[str, ModelFacts], model: str, cheap_model: str | None) -> Prices | None:
    """The prices of ``model`` and of the model that summarises for it; None when ``model`` has none
    (an unpriced cheap model counts as free: its calls are not billed by this gateway's table)."""
    facts = models.get(model)
    if facts is None or facts.input_price is None:
        return None
    cached = facts.cached_input_price if facts.cached_input_price is not None else facts.input_price
    cheap = models.get(cheap_model or model)
    cheap_input = cheap.input_price if cheap is not None and cheap.input_price is not None else 0.0
    cheap_output = cheap.output_price if cheap is not None and cheap.output_price is not None else 0.0
    return Prices(facts.input_price / 1e6, cached / 1e6, cheap_input / 1e6, cheap_output / 1e6)
