"""The engine: built from a validated ``policies:`` section and the model table; decides per request.

Matching: the rules in file order, first match wins, then the default policy. A rule matches when
every criterion it gives holds: tenant globs, requested-model globs, header value globs.

Observe mode and passthrough (``x-gateway-policy: passthrough``, honoured only when the tenant is
granted it) forward the request unchanged, but only when that keeps the invariant under the matched
policy's ``allow_over_cliff``; otherwise the invariant wins and the policy's action applies, with a
warning. Either way ``Decision.proposed`` records what the policy asked for.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import replace
from types import MappingProxyType

import policies.escalation as escalation
import policies.notices as notices
from policies.actions import PLANNERS
from policies.bands import ModelBands, TokenBands
from policies.context import Context, Planner
from policies.decision import Action, Decision
from policies.errors import PolicyConfigError, Problem
from policies.facts import Facts, ModelFacts
from policies.policy import Policy, compile_policy
from policies.schema import PoliciesConfig

PASSTHROUGH_HEADER = "x-gateway-policy"
PASSTHROUGH_VALUE = "passthrough"


class UnknownModel(LookupError):
    """``decide`` was asked about a model that is not in the engine's model table."""


class PolicyEngine:
    """Decisions for requests; immutable once built (rebuild it on config reload)."""

    __slots__ = ("_bands", "_header_names", "_model_facts", "_planners", "_policies")

    def __init__(
        self,
        config: PoliciesConfig,
        *,
        models: Mapping[str, ModelFacts],
        embedding_models: Collection[str] = (),
        tenants: Collection[str] | None = None,
    ) -> None:
        """Check ``config`` against the chat ``models`` and compile it; raises ``PolicyConfigError``."""
        config.validate_against(models, embedding_models=embedding_models, tenants=tenants)
        problems: list[Problem] = []
        token_bands = TokenBands(config.bands)
        bands: dict[str, ModelBands] = {}
        for name, facts in models.items():
            try:
                bands[name] = token_bands.for_model(name, facts)
            except PolicyConfigError as exc:
                problems.extend(exc.problems)
        if problems:
            raise PolicyConfigError(problems)
        policies: list[Policy] = []
        for loc, body in config.bodies():
            try:
                policies.append(compile_policy(body, loc=loc, bands=bands))
            except PolicyConfigError as exc:
                problems.extend(exc.problems)
        if problems:
            raise PolicyConfigError(problems)
        self._bands: Mapping[str, ModelBands] = MappingProxyType(bands)
        self._model_facts: Mapping[str, ModelFacts] = MappingProxyType(dict(models))
        self._policies = tuple(policies)
        self._planners: dict[Action, Planner] = {action: planner() for action, planner in PLANNERS.items()}
        names = {name for rule in config.rules for name in (rule.match.headers or {})}
        self._header_names = frozenset({*names, PASSTHROUGH_HEADER})

    @property
    def bands(self) -> Mapping[str, ModelBands]:
        """The bands of every model in the table (e.g. to skip exact counting below the warning line)."""
        return self._bands

    def conversation_from(self, model: str) -> int | None:
        """The fewest prompt tokens at which a decision for ``model`` weighs its conversation's cache
        state: its warning line, or the smallest compaction target of a policy that compacts early
        (``compress.compact_early``); None for a model not in the table."""
        bands = self._bands.get(model)
        if bands is None:
            return None
        early = [
            policy.compress[model].target_tokens
            for policy in self._policies
            if model in policy.compress and policy.compress[model].compact_early
        ]
        return min([bands.warning, *early])

    @property
    def policies(self) -> tuple[Policy, ...]:
        """The compiled policies in matching order, the default last."""
        return self._policies

    @property
    def header_names(self) -> frozenset[str]:
        """The lower-case request header names ``Facts.headers`` must carry when present."""
        return self._header_names

    def decide(self, facts: Facts) -> Decision:
        """The decision for a request as received; raises ``UnknownModel`` for a model not in the table."""
        bands = self._bands.get(facts.model)
        if bands is None:
            raise UnknownModel(facts.model)
        policy = next(policy for policy in self._policies if policy.matches(facts))
        band = bands.band_of(facts.prompt_tokens)
        warnings: list[str] = []
        if facts.prompt_tokens >= bands.warning:
            warnings.append(notices.line_reached(bands, facts.prompt_tokens))
        if facts.cache is not None and facts.cache.branched:
            warnings.append(notices.branched_after_cut())
        passthrough = _passthrough(facts, warnings)
        context = Context(
            facts=facts,
            policy=policy,
            bands=bands,
            band=band,
            models=self._bands,
            model_facts=self._model_facts,
            warnings=tuple(warnings),
        )
        enforced = self._planners[policy.actions[band]].plan(context)
        if not (policy.observe or passthrough):
            return enforced
        if bands.admits(facts.prompt_tokens, allow_over_cliff=policy.allow_over_cliff):
            if policy.observe and enforced.action is not Action.FORWARD:
                context = context.warned(notices.observe_only(policy.name, enforced.action))
            chosen = context.decision(Action.FORWARD)
        else:
            reason = "passthrough" if passthrough else "observe mode"
            warning = notices.opt_out_overridden(reason, policy.name, bands, facts.prompt_tokens)
            chosen = replace(enforced, warnings=(*enforced.warnings, warning))
        return replace(chosen, observe=policy.observe, passthrough=passthrough, proposed=enforced.action)

    def after_transform(self, decision: Decision, facts: Facts, new_tokens: int) -> Decision:
        """Check the result of ``decision.transforms[0]``; escalate when it is not small enough."""
        return escalation.after_transform(decision, facts, new_tokens)

    def after_failure(
        self, decision: Decision, facts: Facts, *, reason: str, lasting: bool = False
    ) -> Decision:
        """Apply the policy's ``on_failure`` after ``decision.transforms[0]`` raised (``lasting``: the
        failure lies in the request itself, so a rejection is 400, not 503)."""
        return escalation.after_failure(decision, facts, reason=reason, lasting=lasting)


def _passthrough(facts: Facts, warnings: list[str]) -> bool:
    value = facts.headers.get(PASSTHROUGH_HEADER)
    if value is None:
        return False
    if value.strip().lower() != PASSTHROUGH_VALUE:
        warnings.append(notices.unknown_policy_header())
        return False
    if not facts.tenant_allows_passthrough:
        warnings.append(notices.passthrough_not_granted(facts.tenant))
        return False
    return True
