"""The seams through which the gateway supplies what the compressors need."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

Message = dict[str, Any]
"""A chat message as parsed from JSON (role, content, name, tool_calls, tool_call_id, ...)."""


class TokenCounter(Protocol):
    """Counts tokens with the target model's encoding."""

    def count_text(self, text: str) -> int: ...

    def count_messages(self, messages: Sequence[Message]) -> int:
        """Tokens of these messages as billed in a chat request (per-message overhead included)."""
        ...

    def encode(self, text: str) -> list[int]: ...

    def decode(self, tokens: Sequence[int]) -> str: ...


class Completer(Protocol):
    """Completes a prompt through a cheap model; raises on failure."""

    async def complete(self, messages: Sequence[Message], *, max_tokens: int) -> str: ...


class Embedder(Protocol):
    """Embeds texts through a configured embeddings model; raises on failure."""

    async def embed(self, texts: Sequence[str]) -> list[list[float]]: ...


class Cache(Protocol):
    """A shared byte cache with a short lock for single flight (Redis in the gateway)."""

    async def get(self, key: str) -> bytes | None: ...

    async def set(self, key: str, value: bytes, *, ttl_seconds: int) -> None: ...

    async def acquire(self, key: str, *, ttl_seconds: float) -> bool:
        """Try to take the lock named ``key``; True when this caller holds it."""
        ...

    async def release(self, key: str) -> None: ...
