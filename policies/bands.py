"""Token bands of a model: below the warning line, in the warning band, over the price cliff, over
the context window.

``TokenBands`` places the lines, in this order of precedence:

- the cliff: the first ``bands:`` override whose glob matches the model and sets ``cliff_tokens``,
  else the model's first price tier threshold, else its context window; never above the window;
- the warning line: the override's ``warning_tokens``, else its ``warning_ratio`` of the cliff;
  by default 250/272 of the cliff (250,000 for the 272K tier) when the model has a cliff below its
  window (a price tier or an override), else the context window itself.

Bands are closed at the cliff: an input of exactly ``cliff`` tokens is billed at the base price.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from enum import StrEnum
from fractions import Fraction
from typing import TYPE_CHECKING

from policies.errors import PolicyConfigError, Problem
from policies.facts import ModelFacts
from policies.globs import glob_pattern

if TYPE_CHECKING:
    from policies.schema import BandOverride

DEFAULT_WARNING_FRACTION = Fraction(250_000, 272_000)
"""The warning line's default place under a cliff: 250,000 tokens for the 272K tier (~91.9%)."""


class Band(StrEnum):
    BELOW_WARNING = "below_warning"
    WARNING = "warning"
    OVER_CLIFF = "over_cliff"
    OVER_WINDOW = "over_window"


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelBands:
    model: str
    warning: int
    """The first token count in the warning band."""
    cliff: int
    """The largest input billed at the base price."""
    window: int
    """The largest input the model accepts."""
    tiered: bool
    """The cliff comes from a price tier or an override (else it is the context window)."""
    override: str | None = None
    """The ``bands:`` glob that applied, if any."""

    def band_of(self, tokens: int) -> Band:
        if tokens < self.warning:
            return Band.BELOW_WARNING
        if tokens <= self.cliff:
            return Band.WARNING
        if tokens <= self.window:
            return Band.OVER_CLIFF
        return Band.OVER_WINDOW

    def admits(self, tokens: int, *, allow_over_cliff: bool) -> bool:
        """Whether ``tokens`` may go upstream to this model unchanged under the invariant."""
        return tokens <= (self.window if allow_over_cliff else self.cliff)

    def near_line(self, tokens: int, margin: int) -> bool:
        """Whether ``tokens`` is within ``margin`` of the warning line or the cliff (either side), where a
        small error in the count could change the band."""
        return margin > 0 and any(abs(tokens - line) <= margin for line in (self.warning, self.cliff))

    def span(self, band: Band) -> tuple[int, int | None] | None:
        """The token counts in ``band`` as (first, last); last None is unbounded; None when empty."""
        first, last = {
            Band.BELOW_WARNING: (0, self.warning - 1),
            Band.WARNING: (self.warning, self.cliff),
            Band.OVER_CLIFF: (self.cliff + 1, self.window),
            Band.OVER_WINDOW: (self.window + 1, None),
        }[band]
        if last is not None and last < first:
            return None
        return first, last


class TokenBands:
    """The rule that places each model's warning line and cliff (see the module docstring)."""

    def __init__(self, overrides: Mapping[str, BandOverride]) -> None:
        self._overrides = [(glob, glob_pattern([glob]), override) for glob, override in overrides.items()]

    def for_model(self, name: str, facts: ModelFacts) -> ModelBands:
        """The bands of one model; raises ``PolicyConfigError`` when an override does not fit it."""
        window = facts.context_window
        tier = facts.tier_threshold
        if tier is not None and tier >= window:
            tier = None  # a tier at or beyond the window never applies
        found = next(((glob, o) for glob, pattern, o in self._overrides if pattern.match(name)), None)
        glob, override = found if found is not None else (None, None)
        loc = ("policies", "bands", glob or "")
        cliff = window if tier is None else tier
        if override is not None and override.cliff_tokens is not None:
            if override.cliff_tokens > window:
                raise _problem(
                    (*loc, "cliff_tokens"),
                    f"{override.cliff_tokens} is above the context window {window} of model {name!r}",
                )
            cliff = override.cliff_tokens
        tiered = cliff < window or tier is not None
        warning = int(DEFAULT_WARNING_FRACTION * cliff) if tiered else cliff
        if override is not None and override.warning_ratio is not None:
            warning = int(Decimal(repr(override.warning_ratio)) * cliff)
        if override is not None and override.warning_tokens is not None:
            warning = override.warning_tokens
        if warning > cliff:
            message = f"warning line {warning} is above the cliff {cliff} of model {name!r}"
            raise _problem((*loc, "warning_tokens"), message)
        if warning < 2:
            where = loc if glob is not None else ("models", name, "context_window")
            raise _problem(where, f"warning line {warning} of model {name!r} leaves no room below it")
        return ModelBands(
            model=name, warning=warning, cliff=cliff, window=window, tiered=tiered, override=glob
        )


def _problem(loc: tuple[str, ...], message: str) -> PolicyConfigError:
    return PolicyConfigError([Problem(loc, message)])
