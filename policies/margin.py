"""How far the gateway's count of a prompt may be from the provider's, and what follows near a line.

Two qualities of count:

- exact: the model's own encoding (OpenAI models). The count misses only the provider's framing, images
  whose size is unknown and the like: a few thousand tokens at most, whatever the prompt's size, so the
  margin is a number of tokens (``confirm_within_tokens``);
- estimated: the encoding is a stand-in for a tokenizer that is not public (Claude's, counted with o200k).
  Its error grows with the prompt: o200k counts of Claude prompts ran about 13% under the provider's, and
  one 178K estimate was billed at 207K (16% under). The margin is then a share of the count
  (``confirm_within_ratio``, 0.2 by default, above the worst error seen).

Within its margin of the warning line or the cliff a count could be in either band: the gateway asks the
provider's own count when it can. An estimate it cannot confirm is decided as if it were at the top of
its error band (``top``), so that an undercount never sends a request over a price line.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from decimal import Decimal

from policies.bands import ModelBands


@dataclass(frozen=True, slots=True, kw_only=True)
class CountMargin:
    tokens: int = 0
    """The margin of an exact count (``confirm_within_tokens``); 0 turns confirmation off for it."""
    ratio: float = 0.0
    """The error bound of an estimated count, as a share of it (``confirm_within_ratio``)."""

    def of(self, tokens: int, *, estimated: bool) -> int:
        """How far from a line a count of ``tokens`` could still be on its other side."""
        if not estimated:
            return self.tokens
        return max(self.tokens, _share(self.ratio, tokens))

    def near_line(self, bands: ModelBands, tokens: int, *, estimated: bool) -> bool:
        """Whether the band of ``tokens`` could change within the count's margin."""
        return bands.near_line(tokens, self.of(tokens, estimated=estimated))

    def top(self, tokens: int, *, estimated: bool) -> int:
        """The most the provider could count for a count of ``tokens``: the safe count to decide on when
        the provider's own is not to be had (an exact count is its own top)."""
        if not estimated:
            return tokens
        return tokens + _share(self.ratio, tokens)

    def unconfirmed(self, tokens: int) -> str:
        """The warning of an estimate decided at its top, in another band than its own (ASCII)."""
        return (
            f"input tokens estimated at {tokens}, unconfirmed by the provider: decided as "
            f"{self.top(tokens, estimated=True)} (confirm_within_ratio {self.ratio})"
        )


def _share(ratio: float, tokens: int) -> int:
    """``ratio`` of ``tokens`` rounded up, in integers (the ratio as written is a fraction)."""
    numerator, denominator = _fraction(ratio)
    return -(-numerator * tokens // denominator)


@functools.lru_cache(maxsize=64)
def _fraction(ratio: float) -> tuple[int, int]:
    """The ratio as written (``repr``), exact, as a fraction: a margin is rounded up from it, never from its
    binary neighbour. Made once per ratio (a policy has one or two), not on every request."""
    ratio_of = Decimal(repr(ratio)).as_integer_ratio()
    return ratio_of[0], ratio_of[1]


NO_MARGIN = CountMargin()
"""No confirmation, no allowance for an estimate's error."""
