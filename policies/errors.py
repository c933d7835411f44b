"""Problems found when a policy config is checked against the gateway's models."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

Loc = tuple[str | int, ...]


@dataclass(frozen=True, slots=True)
class Problem:
    """One problem at a location of the gateway config, e.g. ``("policies", "rules", 2, "reroute")``."""

    loc: Loc
    message: str

    def __str__(self) -> str:
        return f"{'.'.join(str(part) for part in self.loc)}: {self.message}"


class PolicyConfigError(ValueError):
    """A policy config that parses but does not fit the model table; lists every problem found."""

    def __init__(self, problems: Sequence[Problem]) -> None:
        self.problems = tuple(problems)
        super().__init__("\n".join(str(problem) for problem in self.problems))
