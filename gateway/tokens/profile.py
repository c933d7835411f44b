"""What counting needs to know about one model: its encoding, image rule and tool overheads."""

from __future__ import annotations

from dataclasses import dataclass

import tiktoken

from gateway.tokens.images import ImageRule
from gateway.tokens.tools import ToolOverheads


@dataclass(frozen=True, slots=True)
class Profile:
    encoding_name: str
    encoding: tiktoken.Encoding
    image_rule: ImageRule
    tools: ToolOverheads
    assumed_image_size: tuple[int, int]
    approximate: bool
    """The encoding is the configured default, not known for this model."""

    @property
    def cache_key(self) -> tuple[str, ImageRule]:
        """What a cached per-message count depends on besides the message itself."""
        return (self.encoding_name, self.image_rule)

    def count(self, text: str) -> int:
        """Tokens of ``text``; special-token strings count as ordinary text, as in a chat message."""
        return len(self.encoding.encode_ordinary(text))
