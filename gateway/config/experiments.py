"""Which experiments watch a request: an index by primary model, built once per loaded config.

A request whose model no experiment watches costs one dict lookup. Sampling is a pure function of the
request id and the experiment's name (``gateway.sampling.decide.sample_fraction``), so every replica
makes the same choice and two experiments on the same model sample independently.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from gateway.config.schema.experiments import ExperimentConfig
from gateway.config.schema.root import GatewayConfig
from gateway.sampling.decide import is_sampled


@dataclass(frozen=True, slots=True)
class Watch:
    name: str
    config: ExperimentConfig
    api: str = "openai"
    """The API the candidate's provider speaks (``kind``): the experiment watches only requests of that
    API's fronts (the gateway does not translate between APIs)."""


@dataclass(frozen=True, slots=True)
class ExperimentIndex:
    shadows: Mapping[str, tuple[Watch, ...]] = field(default_factory=dict)
    """primary model → the enabled shadow experiments watching it"""
    splits: Mapping[str, tuple[Watch, ...]] = field(default_factory=dict)
    """primary model → the split experiments watching it (disabled ones too: their conversations finish
    on the model they started on)"""
    allowed: frozenset[str] = frozenset()
    """tenants that allow experiments (``tenants.<name>.experiments``)"""


EMPTY = ExperimentIndex()


def index_of(config: GatewayConfig) -> ExperimentIndex:
    if not config.experiments:
        return EMPTY
    shadows: dict[str, list[Watch]] = {}
    splits: dict[str, list[Watch]] = {}
    for name, experiment in config.experiments.items():
        if experiment.mode == "shadow" and not experiment.enabled:
            continue
        target = shadows if experiment.mode == "shadow" else splits
        candidate = config.models[experiment.candidate]
        api = config.providers[candidate.provider].kind
        for model in experiment.primary:
            target.setdefault(model, []).append(Watch(name, experiment, api))
    return ExperimentIndex(
        shadows={model: tuple(watches) for model, watches in shadows.items()},
        splits={model: tuple(watches) for model, watches in splits.items()},
        allowed=frozenset(name for name, tenant in config.tenants.items() if tenant.experiments),
    )


def matches(
    watch: Watch,
    *,
    tenant: str,
    headers: Mapping[str, str],
    tokens: int | None,
    index: ExperimentIndex,
    opted_out: bool = False,
    api: str = "openai",
) -> bool:
    """The request is in the experiment's traffic: its tenant allows experiments and is matched, its
    headers match, and its prompt (as received; None: not known yet, a split's routing) is in range.
    ``opted_out``: whether it would be, but for its tenant's ``experiments: false``. ``api``: the API of the
    front the request came in on (``openai``: chat and Responses; ``anthropic``: Messages)."""
    match = watch.config.match
    if api != watch.api or (tenant in index.allowed) is opted_out or tenant in match.exclude_tenants:
        return False
    if match.tenants and tenant not in match.tenants:
        return False
    if any(headers.get(name) != value for name, value in match.headers.items()):
        return False
    return tokens is None or match.admits_tokens(tokens)


def sampled(watch: Watch, request_id: str) -> bool:
    return is_sampled(f"{watch.name}\x00{request_id}", watch.config.sample_rate)
