"""Which tiktoken encoding counts a model: the config's ``encoding`` first, then name prefixes, then the
configured default (and then the count is approximate)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from fnmatch import fnmatchcase

from gateway.config.schema.counting import EncodingName

PREFIX_ENCODINGS: tuple[tuple[str, EncodingName], ...] = (
    ("gpt-4o*", "o200k_base"),
    ("chatgpt-4o*", "o200k_base"),
    ("gpt-4.1*", "o200k_base"),
    ("gpt-4.5*", "o200k_base"),
    ("gpt-5*", "o200k_base"),
    ("o1", "o200k_base"),
    ("o1-*", "o200k_base"),
    ("o3", "o200k_base"),
    ("o3-*", "o200k_base"),
    ("o4", "o200k_base"),
    ("o4-*", "o200k_base"),
    ("gpt-4", "cl100k_base"),
    ("gpt-4-*", "cl100k_base"),
    ("gpt-3.5*", "cl100k_base"),
    ("gpt-35*", "cl100k_base"),
    ("text-embedding-3-*", "cl100k_base"),
    ("text-embedding-ada-002*", "cl100k_base"),
)
"""Glob on the model's base name, first match wins."""


@dataclass(frozen=True, slots=True)
class EncodingChoice:
    name: str
    approximate: bool


def base_name(model: str) -> str:
    """The OpenAI model a name refers to: ``openai/gpt-4o`` -> ``gpt-4o``,
    ``ft:gpt-4o-mini:org::id`` -> ``gpt-4o-mini``; lower case."""
    name = model.strip().lower()
    if name.startswith("ft:"):
        name = name[3:].split(":", 1)[0]
    return name.rsplit("/", 1)[-1]


def encoding_by_prefix(names: Iterable[str]) -> EncodingName | None:
    """The encoding the first of ``names`` that a prefix rule knows uses, if any."""
    for model in names:
        name = base_name(model)
        for pattern, encoding in PREFIX_ENCODINGS:
            if fnmatchcase(name, pattern):
                return encoding
    return None


def choose_encoding(names: Iterable[str], *, configured: str | None, default: str) -> EncodingChoice:
    """``configured`` (the model's ``encoding`` in config) wins; then the prefix rules over ``names``
    (the upstream model name, then the gateway's name for it); then ``default``, marked approximate."""
    if configured is not None:
        return EncodingChoice(name=configured, approximate=False)
    found = encoding_by_prefix(names)
    if found is not None:
        return EncodingChoice(name=found, approximate=False)
    return EncodingChoice(name=default, approximate=True)
