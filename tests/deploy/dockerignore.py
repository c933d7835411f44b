"""What a ``.dockerignore`` leaves in the build context, by Docker's rules.

Patterns use Go's ``filepath.Match`` syntax plus ``**`` (any number of directories); a pattern that
matches a directory excludes everything below it; ``!`` re-includes; the last matching pattern wins.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Rule:
    pattern: re.Pattern[str]
    exclude: bool
    """False for a ``!`` exception, which puts matching paths back into the context"""


def translate(pattern: str) -> re.Pattern[str]:
    """A Docker ignore pattern as an anchored regular expression over slash-separated paths."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
            continue
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        if char == "*":
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "[":
            end = pattern.find("]", i + 1)
            if end == -1:
                out.append(re.escape(char))
            else:
                body = pattern[i + 1 : end]
                if body.startswith(("!", "^")):
                    body = "^" + body[1:]
                out.append(f"[{body}]")
                i = end
        elif char == "\\" and i + 1 < len(pattern):
            i += 1
            out.append(re.escape(pattern[i]))
        else:
            out.append(re.escape(char))
        i += 1
    return re.compile("".join(out))


def parse_dockerignore(text: str) -> tuple[Rule, ...]:
    rules = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        exclude = not line.startswith("!")
        cleaned = posixpath.normpath(line.lstrip("!").strip()).lstrip("/")
        rules.append(Rule(pattern=translate(cleaned), exclude=exclude))
    return tuple(rules)


def in_context(rules: tuple[Rule, ...], path: str) -> bool:
    """Whether ``path`` (relative to the context root, with slashes) is sent to the builder."""
    parts = posixpath.normpath(path).split("/")
    prefixes = ["/".join(parts[: end + 1]) for end in range(len(parts))]
    included = True
    for rule in rules:
        if any(rule.pattern.fullmatch(prefix) for prefix in prefixes):
            included = not rule.exclude
    return included
