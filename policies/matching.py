"""Which policy a request falls under: tenant, model and header globs (``fnmatch`` syntax, case-sensitive)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from policies.facts import Facts
from policies.globs import glob_pattern

if TYPE_CHECKING:
    from policies.schema import MatchConfig


@dataclass(frozen=True, slots=True)
class Matcher:
    """A rule's ``match:`` compiled; every criterion given must hold."""

    tenants: re.Pattern[str] | None
    models: re.Pattern[str] | None
    headers: tuple[tuple[str, re.Pattern[str]], ...]
    text: str
    """The criteria as written, e.g. ``tenants acme; models gpt-5*; header x-team research*``."""

    @classmethod
    def from_config(cls, config: MatchConfig) -> Matcher:
        criteria = (("tenants", config.tenants), ("models", config.models))
        parts = [f"{field} {' '.join(globs)}" for field, globs in criteria if globs]
        parts.extend(f"header {name} {value}" for name, value in (config.headers or {}).items())
        return cls(
            tenants=None if config.tenants is None else glob_pattern(config.tenants),
            models=None if config.models is None else glob_pattern(config.models),
            headers=tuple((name, glob_pattern([value])) for name, value in (config.headers or {}).items()),
            text="; ".join(parts),
        )

    def matches_model(self, model: str) -> bool:
        return self.models is None or self.models.match(model) is not None

    def matches(self, facts: Facts) -> bool:
        if self.tenants is not None and self.tenants.match(facts.tenant) is None:
            return False
        if not self.matches_model(facts.model):
            return False
        for name, pattern in self.headers:
            value = facts.headers.get(name)
            if value is None or pattern.match(value) is None:
                return False
        return True
