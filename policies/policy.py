"""A policy compiled for the engine: its matcher, band actions and per-model transform settings."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal

from policies.bands import Band, ModelBands
from policies.decision import Action
from policies.errors import Loc, PolicyConfigError, Problem
from policies.facts import Facts
from policies.matching import Matcher
from policies.schema import CompressConfig, PolicyBody, RetrieveConfig, RuleConfig
from policies.settings import CompressSettings, Fallback, RetrieveSettings

DEFAULT_TARGET_RATIO = 0.6
"""A compressed request aims at 60% of the warning line, so the next turns do not trigger again."""
DEFAULT_BUDGET_RATIO = 0.5
"""A retrieved request aims at half the warning line."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Policy:
    name: str
    loc: Loc
    matcher: Matcher | None
    """None for the default policy, which matches every request."""
    observe: bool
    allow_over_cliff: bool
    actions: Mapping[Band, Action]
    reroute_model: str | None
    compress: Mapping[str, CompressSettings]
    """Settings per model this policy can match."""
    retrieve: Mapping[str, RetrieveSettings]
    confirm_within: int = 0
    """Confirm a count this close to the warning line or the cliff with the provider's (when it can)."""

    def matches(self, facts: Facts) -> bool:
        return self.matcher is None or self.matcher.matches(facts)


def compile_policy(body: PolicyBody, *, loc: Loc, bands: Mapping[str, ModelBands]) -> Policy:
    """Compile one policy for the models it can match; raises ``PolicyConfigError`` on misfits."""
    matcher = Matcher.from_config(body.match) if isinstance(body, RuleConfig) else None
    problems: list[Problem] = []
    compress: dict[str, CompressSettings] = {}
    retrieve: dict[str, RetrieveSettings] = {}
    for model, model_bands in bands.items():
        if matcher is not None and not matcher.matches_model(model):
            continue
        try:
            compress[model] = _compress(body.compress, model_bands, (*loc, "compress"))
        except PolicyConfigError as exc:
            problems.extend(exc.problems)
        try:
            retrieve[model] = _retrieve(body.retrieve, model_bands, (*loc, "retrieve"))
        except PolicyConfigError as exc:
            problems.extend(exc.problems)
    if problems:
        raise PolicyConfigError(problems)
    return Policy(
        name=body.name,
        loc=loc,
        matcher=matcher,
        observe=body.mode == "observe",
        allow_over_cliff=body.allow_over_cliff,
        actions={Band(band): Action(action) for band, action in body.actions.model_dump().items()},
        reroute_model=None if body.reroute is None else body.reroute.model,
        compress=compress,
        retrieve=retrieve,
        confirm_within=body.confirm_within_tokens,
    )


def _below_warning(
    value: int | None, ratio: float | None, default: float, bands: ModelBands, loc: Loc
) -> int:
    if value is None:
        share = Decimal(repr(ratio if ratio is not None else default))
        return max(1, int(share * bands.warning))
    if value >= bands.warning:
        raise PolicyConfigError(
            [Problem(loc, f"{value} is not below the warning line {bands.warning} of model {bands.model!r}")]
        )
    return value


def _compress(config: CompressConfig, bands: ModelBands, loc: Loc) -> CompressSettings:
    return CompressSettings(
        cheap_model=config.cheap_model,
        keep_recent_turns=config.keep_recent_turns,
        keep_recent_tokens=config.keep_recent_tokens,
        target_tokens=_below_warning(
            config.target_tokens, config.target_ratio, DEFAULT_TARGET_RATIO, bands, (*loc, "target_tokens")
        ),
        precompress_at=config.precompress_at,
        chunk_tokens=config.chunk_tokens,
        on_failure=Fallback(config.on_failure),
    )


def _retrieve(config: RetrieveConfig, bands: ModelBands, loc: Loc) -> RetrieveSettings:
    return RetrieveSettings(
        chunk_tokens_min=config.chunk_tokens_min,
        chunk_tokens_max=config.chunk_tokens_max,
        overlap_tokens=config.overlap_tokens,
        document_min_tokens=config.document_min_tokens,
        budget_tokens=_below_warning(
            config.budget_tokens, config.budget_ratio, DEFAULT_BUDGET_RATIO, bands, (*loc, "budget_tokens")
        ),
        hybrid=config.hybrid,
        embedding_model=config.embedding_model,
        compress_history_share=config.compress_history_share,
        on_failure=Fallback(config.on_failure),
    )
