"""The mock Anthropic upstream's prompt cache, simulated the way Anthropic's explicit cache behaves.

A prompt is a sequence of blocks in the order the model reads them: the tools, the system blocks, then
every message's content blocks (a string content is one block). A block carrying ``cache_control`` is a
breakpoint (at most four): the prefix up to and including it is written to the cache, for 5 minutes or,
with ``"ttl": "1h"``, an hour, when it holds at least ``min_tokens`` tokens. A request reads the longest
cached prefix that ends at one of its breakpoints or at one of the 20 block boundaries before each (the
lookback), and a hit refreshes that entry. Usage then says: ``cache_read_input_tokens`` (the prefix read),
``cache_creation_input_tokens`` (from there to the last breakpoint written, split by TTL in
``cache_creation``) and ``input_tokens`` (the rest, after the last breakpoint): Anthropic's convention, in
which ``input_tokens`` excludes both.

Tokens are counted with the o200k encoding (a stand-in for Claude's tokenizer, which is not public) times
``factor``, so that the provider's count and the gateway's estimate differ as they do for real. The
entries live in the OpenAI mock's ``PromptCache`` (its clock, its ``age`` and ``enabled``, its reset), under
model names of their own.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from tests.mock.cache import PromptCache

MAX_BREAKPOINTS = 4
LOOKBACK_BLOCKS = 20
MESSAGE_FRAMING = 3
"""Tokens each message adds beyond its blocks (its role and turn markers)."""
IMAGE_TOKENS = 1_000
TTL_SECONDS = {"5m": 300.0, "1h": 3_600.0}


class CacheControlError(ValueError):
    """A request the API refuses for its ``cache_control`` (Anthropic's 400 message)."""


@dataclass(frozen=True, slots=True)
class Block:
    where: str
    """Where the block sits, as Anthropic's errors name it (``tools.0``, ``messages.2.content.0``)."""
    tokens: int
    """Raw o200k tokens, framing included."""
    ttl: str | None
    """The block's ``cache_control`` TTL, when it is a breakpoint."""
    digest: bytes
    """Chained hash of the prompt up to and including this block."""


@dataclass(frozen=True, slots=True)
class CacheUsage:
    input_tokens: int
    read: int
    written_5m: int
    written_1h: int

    @property
    def written(self) -> int:
        return self.written_5m + self.written_1h

    def usage(self, output_tokens: int) -> dict[str, Any]:
        return {
            "input_tokens": self.input_tokens,
            "cache_creation_input_tokens": self.written,
            "cache_read_input_tokens": self.read,
            "cache_creation": {
                "ephemeral_5m_input_tokens": self.written_5m,
                "ephemeral_1h_input_tokens": self.written_1h,
            },
            "output_tokens": output_tokens,
            "service_tier": "standard",
        }


class BreakpointCache:
    def __init__(self, store: PromptCache, *, factor: float = 1.1, min_tokens: int = 1024) -> None:
        self.store = store
        self.factor = factor
        self.min_tokens = min_tokens

    def count(self, body: Mapping[str, Any]) -> int:
        """The provider's count of a request's input (what ``count_tokens`` answers)."""
        return self._scaled(sum(block.tokens for block in self.blocks(body)))

    def use(self, body: Mapping[str, Any]) -> CacheUsage:
        """Read and write the cache for ``body``; raises ``CacheControlError``."""
        blocks = list(self.blocks(body))
        breakpoints = [index for index, block in enumerate(blocks) if block.ttl is not None]
        if len(breakpoints) > MAX_BREAKPOINTS:
            raise CacheControlError(
                f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. "
                f"Found {len(breakpoints)}."
            )
        prefix = [0]
        for block in blocks:
            prefix.append(prefix[-1] + block.tokens)
        total = self._scaled(prefix[-1])
        model = f"anthropic:{body.get('model')}"
        now = self.store.now()
        entries = self.store._blocks
        read_end = 0
        if self.store.enabled:
            for end in sorted(_boundaries(breakpoints), reverse=True):
                if entries.get((model, blocks[end].digest), 0.0) > now:
                    read_end = end + 1
                    entries[(model, blocks[end].digest)] = now + TTL_SECONDS[blocks[end].ttl or "5m"]
                    break
        written = {"5m": 0, "1h": 0}
        start = read_end
        for index in breakpoints:
            end = index + 1
            if end <= read_end or self._scaled(prefix[end]) < self.min_tokens or not self.store.enabled:
                continue
            ttl = blocks[index].ttl or "5m"
            written[ttl] += self._scaled(prefix[end]) - self._scaled(prefix[start])
            entries[(model, blocks[index].digest)] = now + TTL_SECONDS[ttl]
            start = end
        read = self._scaled(prefix[read_end])
        return CacheUsage(
            input_tokens=total - read - written["5m"] - written["1h"],
            read=read,
            written_5m=written["5m"],
            written_1h=written["1h"],
        )

    def blocks(self, body: Mapping[str, Any]) -> Iterator[Block]:
        encode = self.store.counter.profile(str(body.get("model"))).encoding.encode_ordinary
        state = hashlib.blake2b(str(body.get("model")).encode(), digest_size=16)

        def block(where: str, value: Any, framing: int = 0) -> Block:
            ttl = _ttl(where, value)
            data = (
                {key: item for key, item in value.items() if key != "cache_control"}
                if isinstance(value, dict)
                else value
            )
            state.update(orjson.dumps(data, option=orjson.OPT_SORT_KEYS))
            return Block(where, framing + _tokens(encode, data), ttl, state.copy().digest())

        for index, tool in enumerate(_listed(body.get("tools"))):
            yield block(f"tools.{index}", tool)
        system = body.get("system")
        if isinstance(system, str) and system:
            yield block("system", system)
        for index, part in enumerate(_listed(system)):
            yield block(f"system.{index}", part)
        for number, message in enumerate(_listed(body.get("messages"))):
            content = message.get("content") if isinstance(message, dict) else None
            role = str(message.get("role")) if isinstance(message, dict) else ""
            if isinstance(content, str):
                yield block(f"messages.{number}.content", {"role": role, "text": content}, MESSAGE_FRAMING)
                continue
            for index, part in enumerate(_listed(content)):
                yield block(f"messages.{number}.content.{index}", part, MESSAGE_FRAMING if index == 0 else 0)

    def _scaled(self, tokens: int) -> int:
        return round(tokens * self.factor)


def _boundaries(breakpoints: list[int]) -> set[int]:
    """The block indexes a read may end at: each breakpoint and the 20 boundaries before it."""
    return {end for index in breakpoints for end in range(max(0, index - LOOKBACK_BLOCKS), index + 1)}


def _ttl(where: str, value: Any) -> str | None:
    control = value.get("cache_control") if isinstance(value, dict) else None
    if control is None:
        return None
    if not isinstance(control, dict) or control.get("type") != "ephemeral":
        raise CacheControlError(f"{where}.cache_control.type: Input should be 'ephemeral'")
    ttl = control.get("ttl", "5m")
    if ttl not in TTL_SECONDS:
        raise CacheControlError(f"{where}.cache_control.ttl: Input should be '5m' or '1h'")
    return str(ttl)


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _tokens(encode: Any, value: Any) -> int:
    if isinstance(value, str):
        return len(encode(value))
    if isinstance(value, dict):
        kind = value.get("type")
        if kind == "image":
            return IMAGE_TOKENS
        if kind == "text" or "text" in value:
            return len(encode(str(value.get("text", ""))))
        if kind == "thinking":
            return len(encode(str(value.get("thinking", ""))))
        if kind == "tool_result":
            inner = value.get("content")
            if isinstance(inner, str):
                return 5 + len(encode(inner))
            return 5 + sum(_tokens(encode, part) for part in _listed(inner))
    return len(encode(orjson.dumps(value).decode()))
