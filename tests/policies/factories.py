"""Small factories for the policy tests: a model table, a ``policies:`` section, an engine, facts."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from policies import Facts, ModelFacts, PoliciesConfig, PolicyEngine

TIER = 272_000
WARNING = 250_000
LONG_WINDOW = 1_050_000

MODELS: dict[str, ModelFacts] = {
    "gpt-5.4": ModelFacts(context_window=LONG_WINDOW, tier_threshold=TIER, max_output_tokens=128_000),
    "gpt-5.5": ModelFacts(context_window=LONG_WINDOW, tier_threshold=TIER, max_output_tokens=128_000),
    "gpt-4.1": ModelFacts(context_window=1_047_576),
    "gpt-5.4-mini": ModelFacts(context_window=400_000),
    "small": ModelFacts(context_window=128_000),
}


def make_section(**overrides: Any) -> dict[str, Any]:
    """A ``policies:`` section: the default policy named ``default`` plus ``overrides``."""
    section: dict[str, Any] = {"default": {"name": "default"}}
    section.update(overrides)
    return section


def make_engine(
    section: Mapping[str, Any] | None = None,
    *,
    models: Mapping[str, ModelFacts] | None = None,
    **options: Any,
) -> PolicyEngine:
    config = PoliciesConfig.model_validate(section if section is not None else make_section())
    return PolicyEngine(config, models=MODELS if models is None else models, **options)


def make_facts(**overrides: Any) -> Facts:
    values: dict[str, Any] = {"tenant": "acme", "model": "gpt-5.4", "prompt_tokens": 1_000}
    values.update(overrides)
    return Facts(**values)
