"""What the families benchmark reads off a request the upstream received: its text, the planted words
found in it, and how often one conversation changed strategy.

Every string of the body is read, whatever the API's shape, so that a fact inside a tool result, a
Messages block or a Responses item counts as present, and a key or a field name never does.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

STRATEGIES = ("compress", "retrieve")
"""The gateway's answers (``x-gateway-action``) that rewrite a request; a switch is a change between them."""


def strings_of(value: Any) -> Iterator[str]:
    """Every string inside a JSON value (a request body), keys left out: what the model gets to read,
    whatever the API's shape (chat messages, Messages blocks and tool results, Responses items)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from strings_of(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings_of(item)


def text_of_body(body: Any) -> str:
    return "\n".join(strings_of(body))


def present(words: Iterable[str], text: str) -> list[str]:
    """The planted ``words`` found verbatim in ``text`` (a sentence's closing full stop not required, as a
    summary or an excerpt may end a sentence elsewhere)."""
    return [word for word in words if word.rstrip(".") in text]


def switches(actions: Iterable[str]) -> int:
    """Changes between compress and retrieve in one conversation's answers, in order; forwarded requests
    in between do not count (nothing cached is rewritten by the strategy itself)."""
    count, last = 0, None
    for action in actions:
        if action not in STRATEGIES:
            continue
        if last is not None and action != last:
            count += 1
        last = action
    return count
