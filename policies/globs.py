"""Glob patterns (``gpt-5.4*``) of the policy config, compiled: used by the schema's checks, the rules'
matchers and the bands' overrides alike, so that it sits below all three."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable


def glob_pattern(globs: Iterable[str]) -> re.Pattern[str]:
    """One compiled pattern matching a whole string against any of ``globs``."""
    return re.compile("|".join(f"(?:{fnmatch.translate(glob)})" for glob in globs))
