"""What each configured model's bands lead to, per policy: data for ``gateway check-config``."""

from __future__ import annotations

from dataclasses import dataclass

from policies.bands import Band, ModelBands
from policies.decision import Action
from policies.engine import PolicyEngine
from policies.policy import Policy
from policies.settings import Exhausted, Timing


@dataclass(frozen=True, slots=True, kw_only=True)
class BandRow:
    band: Band
    first: int
    last: int | None
    """None: no upper bound."""
    action: Action
    """The action the policy names for the band."""
    model: str
    """The model called (the reroute target for reroute)."""
    detail: str


@dataclass(frozen=True, slots=True, kw_only=True)
class PolicyView:
    policy: str
    match: str
    observe: bool
    allow_over_cliff: bool
    rows: tuple[BandRow, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelView:
    model: str
    bands: ModelBands
    policies: tuple[PolicyView, ...]
    """The policies a request for this model can fall under, in matching order."""


def describe(engine: PolicyEngine) -> tuple[ModelView, ...]:
    views = []
    for model, bands in engine.bands.items():
        policies = tuple(
            _policy_view(policy, bands, engine)
            for policy in engine.policies
            if policy.matcher is None or policy.matcher.matches_model(model)
        )
        views.append(ModelView(model=model, bands=bands, policies=policies))
    return tuple(views)


def _policy_view(policy: Policy, bands: ModelBands, engine: PolicyEngine) -> PolicyView:
    rows = []
    for band in Band:
        span = bands.span(band)
        if span is None:
            continue
        action = policy.actions[band]
        model = policy.reroute_model if action is Action.REROUTE and policy.reroute_model else bands.model
        detail = _detail(policy, action, bands, engine.bands[model], span)
        if band is Band.OVER_CLIFF and action in (Action.COMPRESS, Action.RETRIEVE):
            detail += _exhausted(policy, bands)
        if policy.observe:
            limit = bands.window if policy.allow_over_cliff else bands.cliff
            detail = f"observe only: forwards unchanged up to {limit} tokens; would {action}: {detail}"
        first, last = span
        rows.append(BandRow(band=band, first=first, last=last, action=action, model=model, detail=detail))
    return PolicyView(
        policy=policy.name,
        match=_match_text(policy),
        observe=policy.observe,
        allow_over_cliff=policy.allow_over_cliff,
        rows=tuple(rows),
    )


def _detail(
    policy: Policy, action: Action, bands: ModelBands, target: ModelBands, span: tuple[int, int | None]
) -> str:
    compress = policy.compress[bands.model]
    retrieve = policy.retrieve[bands.model]
    if action is Action.FORWARD:
        if span[0] > bands.cliff:
            return "unchanged, billed at the higher tier"
        if span[0] < bands.warning and compress.compact_early:
            return "unchanged; a warm, growing conversation compacted once that pays, then kept compacted"
        return "unchanged"
    if action is Action.COMPRESS:
        when = (
            "while the cache is warm: forwarded, summary prepared; then "
            if compress.timing is Timing.DEFERRED
            else ""
        )
        extras = [
            f"pins {compress.pinned_tokens} tokens of the user's own words" if compress.pinned_tokens else "",
            f"recalls {compress.recall_tokens} tokens of old turns" if compress.recall_tokens else "",
        ]
        kept = "; ".join(extra for extra in extras if extra)
        return (
            f"{when}summarise old turns with {compress.cheap_model or bands.model} into a request of at "
            f"most {compress.target_tokens} tokens: the recent {compress.keep_recent_tokens} tokens verbatim "
            f"(at least {compress.keep_recent_turns} turns; tool outputs excerpted above "
            f"{compress.keep_recent_max_tokens}){'; ' + kept if kept else ''}; reused up to "
            f"{compress.accept_tokens} tokens; on failure {compress.on_failure}"
        )
    if action is Action.RETRIEVE:
        share = retrieve.compress_history_share
        first = "" if share is None else f"; compress old turns first when history is >= {share:.0%}"
        return (
            f"relevant chunks of documents >= {retrieve.document_min_tokens} tokens, "
            f"within {retrieve.budget_tokens} tokens{first}"
        )
    if action is Action.REROUTE:
        limit = target.window if policy.allow_over_cliff else target.cliff
        text = f"to {target.model} (cliff {target.cliff}, window {target.window})"
        if span[1] is None or span[1] > limit:
            text += f"; above {limit} tokens: on failure {compress.on_failure}"
        return text
    return "403 policy_rejected" if span[0] < bands.warning else "400 context_length_exceeded"


def _exhausted(policy: Policy, bands: ModelBands) -> str:
    """What becomes of a request over the cliff that no transform can bring under it."""
    if policy.allow_over_cliff or policy.on_exhausted is Exhausted.FORWARD:
        return "; what cannot be cut under the cliff: forwarded, billed at the higher tier"
    return "; what cannot be cut under the cliff: 400 context_length_exceeded"


def _match_text(policy: Policy) -> str:
    return "every request no rule matches" if policy.matcher is None else policy.matcher.text
