"""The one value a planner receives, and the seam planners implement."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Protocol

import policies.notices as notices
from policies.bands import Band, ModelBands
from policies.decision import Action, Decision, Rejection
from policies.facts import Facts, ModelFacts
from policies.policy import Policy
from policies.prices import prices_of
from policies.reuse import compacted_size, reuse_limit
from policies.settings import CompressSettings, RetrieveSettings


@dataclass(frozen=True, slots=True, kw_only=True)
class Context:
    facts: Facts
    policy: Policy
    bands: ModelBands
    """The bands of the requested model."""
    band: Band
    models: Mapping[str, ModelBands]
    """The bands of every model, for reroute targets."""
    model_facts: Mapping[str, ModelFacts] = field(default_factory=dict)
    """The table the engine was built with (prices, for the cost of a compaction)."""
    warnings: tuple[str, ...] = ()

    @property
    def tokens(self) -> int:
        return self.facts.prompt_tokens

    @property
    def compress(self) -> CompressSettings:
        """The policy's settings for the model; for a compacted conversation, with the reuse limit its
        growth and prices give (``policies.reuse``)."""
        settings = self.policy.compress[self.bands.model]
        cache = self.facts.cache
        if cache is None or not cache.compacted:
            return settings
        limit = reuse_limit(settings, self.bands, self.model_facts.get(self.bands.model), cache)
        return settings if limit is None else replace(settings, reuse_tokens=limit)

    @property
    def retrieve(self) -> RetrieveSettings:
        return self.policy.retrieve[self.bands.model]

    def precompress_fits(self) -> bool:
        """Whether preparing this request's summary in the background keeps the conversation's
        pre-compression spend within ``compress.precompress_max_usd`` (the summary priced at the cheap
        model's prices; unpriced, only what was spent already is weighed)."""
        cap = self.compress.precompress_max_usd
        if cap is None:
            return True
        cache = self.facts.cache
        spent = cache.precompressed_usd if cache is not None else 0.0
        prices = prices_of(self.model_facts, self.bands.model, self.compress.cheap_model)
        summary = prices.summary(self.tokens - compacted_size(self.compress)) if prices is not None else 0.0
        return spent + summary <= cap

    def warned(self, warning: str) -> Context:
        return replace(self, warnings=(*self.warnings, warning))

    def decision(
        self,
        action: Action,
        *,
        target: ModelBands | None = None,
        transforms: tuple[Action, ...] = (),
        rejection: Rejection | None = None,
    ) -> Decision:
        """A decision for this request; one that sends it upstream above the cliff says so."""
        target = target or self.bands
        sends = not transforms and rejection is None
        above = sends and self.tokens > target.cliff
        at = self.compress.precompress_at
        precompress = action is Action.FORWARD and at is not None and self.tokens >= at
        return Decision(
            action=action,
            model=target.model,
            band=self.band,
            tokens=self.tokens,
            bands=target,
            policy=self.policy.name,
            proposed=action,
            compress=self.compress,
            retrieve=self.retrieve,
            warnings=(*self.warnings, notices.above_cliff(target, self.tokens)) if above else self.warnings,
            transforms=transforms,
            allow_over_cliff=self.policy.allow_over_cliff,
            on_exhausted=self.policy.on_exhausted,
            above_cliff=above,
            precompress=precompress and self.precompress_fits(),
            rejection=rejection,
            margin=self.policy.margin,
        )


class Planner(Protocol):
    """Turns a policy's action for the request's band into a decision that keeps the invariant."""

    def plan(self, context: Context) -> Decision: ...
