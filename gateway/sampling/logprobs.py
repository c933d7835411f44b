"""Mean and minimum token logprob of a completion, when the response carries ``logprobs``.

Non-stream: ``completion_logprobs(body)`` on the parsed chat completion. Stream: a ``LogprobTally`` fed
each parsed chunk (``add_chunk``), then ``summary()``. Both read ``choices[*].logprobs.content`` (and
``refusal``) and ignore anything malformed; no token text is kept.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gateway.base.record import RequestRecord


@dataclass(frozen=True, slots=True)
class LogprobSummary:
    mean: float
    minimum: float
    tokens: int

    def apply(self, record: RequestRecord) -> None:
        record.logprob_mean = self.mean
        record.logprob_min = self.minimum


class LogprobTally:
    """Running sum, minimum and count of token logprobs."""

    __slots__ = ("_minimum", "_sum", "tokens")

    def __init__(self) -> None:
        self._sum = 0.0
        self._minimum = math.inf
        self.tokens = 0

    def add_chunk(self, chunk: Mapping[str, Any]) -> None:
        """One parsed stream chunk, or a whole non-stream completion: both keep logprobs per choice."""
        choices = chunk.get("choices")
        if not isinstance(choices, list):
            return
        for choice in choices:
            logprobs = choice.get("logprobs") if isinstance(choice, dict) else None
            if not isinstance(logprobs, dict):
                continue
            for part in ("content", "refusal"):
                entries = logprobs.get(part)
                if isinstance(entries, list):
                    self._add_entries(entries)

    def _add_entries(self, entries: list[Any]) -> None:
        for entry in entries:
            value = entry.get("logprob") if isinstance(entry, dict) else None
            if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
                self._sum += value
                self.tokens += 1
                if value < self._minimum:
                    self._minimum = float(value)

    def summary(self) -> LogprobSummary | None:
        if not self.tokens:
            return None
        return LogprobSummary(mean=self._sum / self.tokens, minimum=self._minimum, tokens=self.tokens)


def completion_logprobs(body: Mapping[str, Any]) -> LogprobSummary | None:
    """The logprob summary of a parsed non-stream chat completion body, or None when it has none."""
    tally = LogprobTally()
    tally.add_chunk(body)
    return tally.summary()
