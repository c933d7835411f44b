"""The mock upstream's prompt cache, simulated the way OpenAI's behaves.

A prompt is rendered as a token sequence (the tools' JSON, then per message three framing tokens, its role
and its text; what is not text as its JSON), cut into blocks of ``granularity`` tokens, and each block
named by a chained hash of everything up to it. A request's cached tokens are the blocks of its prefix
that an earlier request to the same model left and that were used within the retention (5 minutes;
24 hours with ``prompt_cache_retention: "24h"``), none below ``min_prefix`` tokens and never more than
the prompt. Prompt tokens themselves are counted exactly, as the gateway counts them, so that what the
mock bills and what the gateway estimates can be compared.

Independent of the gateway's own estimate (``gateway.conversations``): this one works on tokens, in
blocks, over every earlier request; the gateway's works on message boundaries of one conversation.
"""

from __future__ import annotations

import hashlib
import time
from array import array
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from gateway.config.schema.counting import CountingConfig
from gateway.fronts.responses.counting import count_responses
from gateway.tokens.counter import TokenCounter

FRAMING = (199999, 199998, 199997)
"""Stand-ins for a message's framing tokens (ids no text encodes to in the rendering)."""


@dataclass
class PromptCache:
    enabled: bool = True
    min_prefix: int = 1024
    granularity: int = 128
    retention: float = 300.0
    extended_retention: float = 86_400.0
    clock: Callable[[], float] = time.monotonic
    offset: float = 0.0
    """Seconds added to the clock (``age``): lets a test make the cache go cold without waiting."""
    _blocks: dict[tuple[str, bytes], float] = field(default_factory=dict)
    """(model, block name) → when it expires."""
    _tokens: dict[bytes, list[int]] = field(default_factory=dict)
    _counter: TokenCounter | None = None

    @property
    def counter(self) -> TokenCounter:
        if self._counter is None:
            self._counter = TokenCounter.build(CountingConfig(), {})
        return self._counter

    def now(self) -> float:
        return self.clock() + self.offset

    def age(self, seconds: float) -> None:
        self.offset += seconds

    def reset(self) -> None:
        self._blocks.clear()
        self.offset = 0.0

    def chat(self, body: Mapping[str, Any]) -> tuple[int, int]:
        """(prompt tokens, cached tokens) of a chat completions request."""
        model = str(body.get("model"))
        prompt = self.counter.count_chat(model, body).total
        messages = body.get("messages") if isinstance(body.get("messages"), list) else []
        return prompt, self._cached(model, body, body.get("tools"), messages, prompt)

    def responses(self, body: Mapping[str, Any]) -> tuple[int, int]:
        """(input tokens, cached tokens) of a Responses request."""
        model = str(body.get("model"))
        prompt = count_responses(self.counter, model, body).total
        value = body.get("input")
        items: list[Any] = (
            [{"role": "user", "content": value}] if isinstance(value, str) else list(value or [])
        )
        instructions = body.get("instructions")
        if isinstance(instructions, str) and instructions:
            items.insert(0, {"role": "system", "content": instructions})
        return prompt, self._cached(model, body, body.get("tools"), items, prompt)

    def _cached(
        self, model: str, body: Mapping[str, Any], tools: Any, messages: Sequence[Any], prompt: int
    ) -> int:
        if not self.enabled:
            return 0
        tokens = self._render(model, tools, messages)
        now = self.now()
        retention = self.extended_retention if body.get("prompt_cache_retention") == "24h" else self.retention
        state = hashlib.blake2b(model.encode(), digest_size=16)
        cached, hit = 0, True
        for start in range(0, len(tokens) - self.granularity + 1, self.granularity):
            state.update(array("I", tokens[start : start + self.granularity]).tobytes())
            name = (model, state.copy().digest())
            if hit and self._blocks.get(name, 0.0) > now:
                cached += self.granularity
            else:
                hit = False
            self._blocks[name] = now + retention
        self._prune(now)
        return min(cached, prompt) if cached >= self.min_prefix else 0

    def _render(self, model: str, tools: Any, messages: Sequence[Any]) -> list[int]:
        encoding = self.counter.profile(model).encoding
        tokens = list(self._encoded(encoding.encode_ordinary, orjson.dumps(tools or [])))
        for message in messages:
            tokens.extend(FRAMING)
            tokens.extend(self._encoded(encoding.encode_ordinary, _text(message)))
        return tokens

    def _encoded(self, encode: Callable[[str], list[int]], data: bytes) -> list[int]:
        key = hashlib.blake2b(data, digest_size=16).digest()
        found = self._tokens.get(key)
        if found is None:
            if len(self._tokens) > 50_000:
                self._tokens.clear()
            found = self._tokens[key] = encode(data.decode())
        return found

    def _prune(self, now: float) -> None:
        if len(self._blocks) > 200_000:
            for name in [name for name, until in self._blocks.items() if until <= now]:
                del self._blocks[name]


def _text(message: Any) -> bytes:
    """A message as the model reads it: its role and text, anything else as its JSON."""
    if not isinstance(message, Mapping):
        return orjson.dumps(message)
    parts = [str(message.get("role", message.get("type", "")))]
    content = message.get("content")
    if isinstance(content, str):
        parts.append(content)
    elif isinstance(content, list):
        for part in content:
            text = part.get("text") if isinstance(part, Mapping) else None
            parts.append(text if isinstance(text, str) else orjson.dumps(part).decode())
    rest = {key: value for key, value in message.items() if key not in ("role", "content", "type")}
    if rest:
        parts.append(orjson.dumps(rest).decode())
    return "\n".join(parts).encode()
