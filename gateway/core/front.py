"""How one API shape shows its prompt to counting and the transforms (``Front``): chat completions as
they are (``CHAT``), the other fronts through adapters to chat-style messages and back."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from gateway.tokens.counter import TokenCount, TokenCounter

PRIVATE = "_gateway_"
"""The prefix of the keys a front's adapter adds to view messages and their parts (its bookkeeping)."""


class TransformFailed(Exception):
    """A transform could not produce a request (the cheap model failed, nothing left to cut, ...).
    ``lasting``: the cause lies in the request itself (nothing to cut), so retrying it cannot help."""

    def __init__(self, reason: str, *, lasting: bool = False) -> None:
        super().__init__(reason)
        self.lasting = lasting


class Front(Protocol):
    """How one API shape shows its prompt to counting and the transforms: chat messages as they are,
    or another shape (Responses input items) through an adapter to chat-style messages and back."""

    approximate: bool
    """Its counts are estimates whatever the model (Messages: Claude's tokenizer is not public)."""

    def count(self, counter: TokenCounter, model: str, body: Mapping[str, Any]) -> TokenCount: ...

    def upper_bound(
        self, counter: TokenCounter, model: str, body: Mapping[str, Any], body_len: int
    ) -> int: ...

    def messages(self, body: Mapping[str, Any]) -> list[Any]:
        """The chat-style messages the transforms work on."""
        ...

    def rebuild(self, body: Mapping[str, Any], messages: list[Any]) -> dict[str, Any]:
        """``body`` with its prompt replaced by transformed ``messages``; raises TransformFailed."""
        ...

    def caps(self, body: Mapping[str, Any]) -> Mapping[str, Any]:
        """The fields of ``body`` that cap its output, under the names a chat body gives them
        (``max_completion_tokens``, ``max_tokens``, ``n``): what the budget hold reads."""
        ...

    def breakpoints(self, body: Mapping[str, Any], views: list[Any]) -> list[tuple[int, int]] | None:
        """The prompt's explicit cache breakpoints, as (element, TTL in seconds): element 0 the tools,
        ``i + 1`` view message ``i`` (``views``: ``messages(body)``); None for an implicit cache."""
        ...


class ChatFront:
    """Chat completions: the messages are the body's own."""

    approximate = False

    def count(self, counter: TokenCounter, model: str, body: Mapping[str, Any]) -> TokenCount:
        return counter.count_chat(model, body)

    def upper_bound(self, counter: TokenCounter, model: str, body: Mapping[str, Any], body_len: int) -> int:
        return counter.upper_bound(model, body, body_len=body_len)

    def messages(self, body: Mapping[str, Any]) -> list[Any]:
        messages: list[Any] = body["messages"]
        return messages

    def rebuild(self, body: Mapping[str, Any], messages: list[Any]) -> dict[str, Any]:
        return {**body, "messages": messages}

    def caps(self, body: Mapping[str, Any]) -> Mapping[str, Any]:
        return body

    def breakpoints(self, body: Mapping[str, Any], views: list[Any]) -> list[tuple[int, int]] | None:
        return None


CHAT = ChatFront()


def countable(message: Mapping[str, Any]) -> dict[str, Any]:
    """A view message without the adapter's bookkeeping (item positions, text sources), so that the
    counter's per-message cache knows it by content: the same turn hits the cache wherever it stands
    (after a compression, or when the client drops its oldest items)."""
    kept = {key: value for key, value in message.items() if not key.startswith(PRIVATE)}
    content = kept.get("content")
    if isinstance(content, list):
        kept["content"] = [
            {key: value for key, value in part.items() if not key.startswith(PRIVATE)}
            if isinstance(part, Mapping)
            else part
            for part in content
        ]
    return kept
