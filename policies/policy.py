"""A policy compiled for the engine: its matcher, band actions and per-model transform settings."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal

from policies.bands import Band, ModelBands
from policies.decision import Action
from policies.errors import Loc, PolicyConfigError, Problem
from policies.facts import Facts
from policies.margin import NO_MARGIN, CountMargin
from policies.matching import Matcher
from policies.schema import CompressConfig, PolicyBody, RetrieveConfig, RuleConfig
from policies.settings import CompressSettings, Exhausted, Fallback, RetrieveSettings, Timing

DEFAULT_TARGET_RATIO = 0.3
"""A fresh compaction counts at most 30% of the warning line (75,000 for a 250,000 line): small enough
that compacting in the band costs less than forwarding a warm 250K prompt (``bench_savings``)."""
DEFAULT_BUDGET_RATIO = 0.5
"""A retrieved request aims at half the warning line."""
DEFAULT_RECENT_RATIO = 0.2
"""What stays verbatim in a compacted request aims at a fifth of its target (15,000 for 75,000); the
user's own words are pinned and old passages recalled besides (``bench_retention``)."""
DEFAULT_RECENT_CAP_RATIO = 0.8
"""Over 80% of the target, the verbatim part's oldest tool outputs are shrunk to excerpts."""


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
    on_exhausted: Exhausted = Exhausted.FORWARD
    """What happens to a request no transform can bring under the cliff (within the window)."""
    margin: CountMargin = NO_MARGIN
    """How close to the warning line or the cliff a count is confirmed with the provider's (when it can),
    and how much larger an estimate left unconfirmed is taken to be."""

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
        on_exhausted=Exhausted(body.on_exhausted),
        margin=CountMargin(tokens=body.confirm_within_tokens, ratio=body.confirm_within_ratio),
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
    target = _below_warning(
        config.target_tokens, config.target_ratio, DEFAULT_TARGET_RATIO, bands, (*loc, "target_tokens")
    )
    ratio = config.keep_recent_ratio if config.keep_recent_ratio is not None else DEFAULT_RECENT_RATIO
    aim = config.keep_recent_tokens or max(1, int(Decimal(repr(ratio)) * target))
    cap = config.keep_recent_max_tokens or max(aim, int(Decimal(repr(DEFAULT_RECENT_CAP_RATIO)) * target))
    timing = Timing(config.timing)
    return CompressSettings(
        cheap_model=config.cheap_model,
        keep_recent_turns=config.keep_recent_turns,
        keep_recent_tokens=aim,
        keep_recent_max_tokens=cap,
        target_tokens=target,
        precompress_at=config.precompress_at,
        chunk_tokens=config.chunk_tokens,
        on_failure=Fallback(config.on_failure),
        timing=timing,
        accept_tokens=bands.cliff if timing is Timing.DEFERRED else target,
        pinned_tokens=config.pinned_tokens,
        pin_max_tokens=config.pin_max_tokens,
        recall_tokens=config.recall_tokens,
        recall_on_tool_steps=config.recall_on_tool_steps,
        client_compaction=tuple(phrase.lower() for phrase in config.client_compaction),
        compact_early=config.compact_early and timing is Timing.DEFERRED,
        precompress_max_usd=config.precompress_max_usd,
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
