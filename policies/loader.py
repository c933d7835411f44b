"""Loading the ``policies:`` section: from the gateway config's data, or the shipped default."""

from __future__ import annotations

from importlib import resources

import yaml

from policies.schema import PoliciesConfig

DEFAULT_FILE = "default.yaml"


def load_default() -> PoliciesConfig:
    """The shipped default policies (``policies/default.yaml``, a ``policies:`` section)."""
    text = resources.files("policies").joinpath(DEFAULT_FILE).read_text(encoding="utf-8")
    return PoliciesConfig.model_validate(yaml.safe_load(text)["policies"])


def parse_policies(data: object) -> PoliciesConfig:
    """Validate the ``policies:`` section as parsed from YAML; no section (None) means the default.

    Raises pydantic's ``ValidationError``, whose locations are relative to the section.
    """
    if data is None:
        return load_default()
    return PoliciesConfig.model_validate(data)
