"""The caller's cost attribution tags: ``x-gateway-tags: team=search,feature=autocomplete``, a request's
``metadata`` and an API key's default tags, checked and merged into the tags of the request's cost events.

A tag is a key and a value. A key is 1 to 64 characters of ASCII letters, digits, ``_``, ``-`` and ``.``,
starting with a letter or a digit (no ``/``: the gateway's own keys in the FOCUS export are ``gateway/...``,
which a caller's key can therefore never be). A value is 1 to 256 characters, none of them a control
character; in the header a value cannot hold a comma (the pairs' separator), and spaces around keys and
values are dropped. A request carries at most ``MAX_TAGS`` tags once its key's defaults are merged in.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

TAGS_HEADER = "x-gateway-tags"
MAX_TAGS = 16
"""As many as OpenAI allows in a ``metadata`` object, so any metadata it takes fits."""
MAX_KEY_CHARS = 64
MAX_VALUE_CHARS = 256

_KEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")

Tags = dict[str, str]


class TagProblem(ValueError):
    """What is wrong with a set of tags, in words a caller can act on."""


def check_key(key: str) -> str:
    if not key:
        raise TagProblem("a tag key is empty")
    if len(key) > MAX_KEY_CHARS:
        raise TagProblem(f"tag key {key[:20]!r}... is {len(key)} characters long (at most {MAX_KEY_CHARS})")
    if not _KEY.fullmatch(key):
        raise TagProblem(
            f"tag key {key!r} may hold only ASCII letters, digits, '_', '-' and '.', and starts with a "
            "letter or a digit"
        )
    return key


def check_value(key: str, value: str) -> str:
    if not value:
        raise TagProblem(f"tag {key!r} has an empty value")
    if len(value) > MAX_VALUE_CHARS:
        raise TagProblem(f"tag {key!r} has a value {len(value)} characters long (at most {MAX_VALUE_CHARS})")
    if _CONTROL.search(value):
        raise TagProblem(f"tag {key!r} has a control character in its value")
    return value


def parse_header(text: str) -> Tags:
    """``team=search, feature=autocomplete`` → ``{"team": "search", "feature": "autocomplete"}``; a key
    given twice is an error (which value was meant is not known)."""
    tags: Tags = {}
    for item in text.split(","):
        pair = item.strip()
        if not pair:
            continue
        key, equals, value = pair.partition("=")
        if not equals:
            raise TagProblem(f"{pair[:40]!r} is not key=value")
        key, value = key.strip(), value.strip()
        check_key(key)
        if key in tags:
            raise TagProblem(f"tag {key!r} is given twice")
        tags[key] = check_value(key, value)
        if len(tags) > MAX_TAGS:
            raise TagProblem(f"more than {MAX_TAGS} tags")
    return tags


def from_mapping(values: object, *, where: str) -> Tags:
    """A JSON object of string values (a request's ``metadata``, a key's ``tags`` in the config) as tags."""
    if not isinstance(values, Mapping):
        raise TagProblem(f"{where} is an object of string values")
    if len(values) > MAX_TAGS:
        raise TagProblem(f"{where} has {len(values)} entries (at most {MAX_TAGS} tags)")
    tags: Tags = {}
    for key, value in values.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise TagProblem(f"{where} holds only string values ({key!r} does not)")
        tags[check_key(key)] = check_value(key, value)
    return tags


def merged(*layers: Mapping[str, str] | None) -> Tags | None:
    """The layers' tags, a later layer's value winning on the same key; None for none at all."""
    tags: Tags = {}
    for layer in layers:
        if layer:
            tags.update(layer)
    if len(tags) > MAX_TAGS:
        raise TagProblem(f"{len(tags)} tags with the API key's defaults (at most {MAX_TAGS})")
    return tags or None
