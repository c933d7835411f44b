"""One model's view of the ``TokenCounter``: what the compressors' ``TokenCounter`` protocol asks for."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from compressors.protocols import Message
from gateway.tokens.counter import TokenCounter


@dataclass(frozen=True, slots=True)
class ModelTokens:
    """Satisfies ``compressors.protocols.TokenCounter`` for ``model``."""

    counter: TokenCounter
    model: str

    def count_text(self, text: str) -> int:
        return self.counter.count_text(self.model, text)

    def count_messages(self, messages: Sequence[Message]) -> int:
        return self.counter.count_messages(self.model, messages)

    def encode(self, text: str) -> list[int]:
        return self.counter.encode(self.model, text)

    def decode(self, tokens: Sequence[int]) -> str:
        return self.counter.decode(self.model, tokens)
