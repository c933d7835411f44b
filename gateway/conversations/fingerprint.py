"""Prefix fingerprints of a prompt, taken at its element boundaries, with the tokens of each prefix.

A provider caches prompt prefixes, so what matters of two requests is how long a prefix they share. The
elements of a prompt are its tool definitions (first: a change of tools changes everything after them),
then its messages (chat messages, or the Responses items as the adapter shows them), each serialised as
JSON without its ``cache_control`` marks. ``hashes[i]`` is a chained sha256 (8 bytes) of elements
``0..i`` and ``tokens[i]`` the prompt tokens of that prefix, so the longest shared prefix of two chains
is read off by comparing hashes, and no text is kept.

A provider with an explicit cache (Anthropic's ``cache_control``) caches only the prefixes that end at a
breakpoint: such a chain also says which elements carry one, and for how long (``breakpoints``); the
chain of a prompt for an implicit cache (OpenAI's) has None there.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

HASH_BYTES = 8
MAX_ELEMENTS = 4096
"""Elements fingerprinted at most (a longer prompt's later elements are not compared)."""
ANCHOR_WITHIN = 8
"""The conversation is named after its prefix up to the first user message within this many messages."""

Breakpoint = tuple[int, int]
"""An element carrying a cache breakpoint, and the breakpoint's TTL in seconds."""


@dataclass(frozen=True, slots=True)
class Chain:
    hashes: bytes
    """``HASH_BYTES`` per element, chained: element ``i``'s names the prefix ``0..i``."""
    tokens: tuple[int, ...]
    """Prompt tokens of each prefix, cumulative."""
    breakpoints: tuple[Breakpoint, ...] | None = None
    """The elements ending a prefix an explicit cache keeps, in order; None: every prefix is cacheable."""

    def __len__(self) -> int:
        return len(self.tokens)

    def shared_elements(self, other: Chain) -> int:
        """How many leading elements both chains share."""
        return _common_elements(self.hashes, other.hashes)

    def shared_tokens(self, other: Chain) -> int:
        """Tokens of the longest prefix both chains share (0 when even the tools differ)."""
        shared = self.shared_elements(other)
        return min(self.tokens[shared - 1], other.tokens[shared - 1]) if shared else 0

    def hash_at(self, index: int) -> bytes:
        return self.hashes[index * HASH_BYTES : (index + 1) * HASH_BYTES]


def _common_elements(first: bytes, second: bytes) -> int:
    """How many leading elements two chains share (chained hashes: equal at ``i`` means equal before)."""
    low, high = 0, min(len(first), len(second)) // HASH_BYTES
    while low < high:  # binary search for the first element that differs
        middle = (low + high + 1) // 2
        end = middle * HASH_BYTES
        if first[end - HASH_BYTES : end] == second[end - HASH_BYTES : end]:
            low = middle
        else:
            high = middle - 1
    return low


def chain_of(
    tools: Any,
    messages: Sequence[Mapping[str, Any]],
    *,
    tools_tokens: int,
    per_message: Sequence[int],
    breakpoints: Sequence[Breakpoint] | None = None,
) -> Chain:
    """The chain of a prompt: its ``tools`` (any JSON, ``None`` for none) and ``messages``, with the tokens
    the counter gave them (``per_message`` in the order of ``messages``); ``breakpoints``: the elements
    (0 the tools, ``i + 1`` message ``i``) an explicit cache keeps the prefix of, None for an implicit
    cache."""
    state = hashlib.sha256(_serialised(tools or []))
    hashes = [state.digest()[:HASH_BYTES]]
    total = tools_tokens
    tokens = [total]
    for message, counted in zip(messages[: MAX_ELEMENTS - 1], per_message, strict=False):
        data = _serialised(message)
        state.update(len(data).to_bytes(8, "big"))
        state.update(data)
        hashes.append(state.digest()[:HASH_BYTES])
        total += counted
        tokens.append(total)
    kept = None if breakpoints is None else tuple(point for point in breakpoints if point[0] < len(tokens))
    return Chain(b"".join(hashes), tuple(tokens), kept)


CACHE_MARK = b'"cache_control"'


def _serialised(value: Any) -> bytes:
    """``value`` as JSON, without its ``cache_control`` marks: a breakpoint says where a cached prefix
    ends, not what it holds, so the message that carried the last request's breakpoint is the same
    message in the next request, which moves the breakpoint on (as Claude Code does every turn)."""
    data = orjson.dumps(value)
    return orjson.dumps(_unmarked(value)) if CACHE_MARK in data else data


def _unmarked(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {key: _unmarked(item) for key, item in value.items() if key != "cache_control"}
    if isinstance(value, list | tuple):
        return [_unmarked(item) for item in value]
    return value


def opening_of(chain: Chain, messages: Sequence[Mapping[str, Any]]) -> Opening | None:
    """The prefix before the first user message (tools, system and developer messages): what any request
    opening the same way shares with this one, whatever it asks (an edited first message, another
    conversation over the same system prompt). None when the prompt opens with no such prefix."""
    first_user = next(
        (
            index
            for index, message in enumerate(messages[:ANCHOR_WITHIN])
            if isinstance(message, Mapping) and message.get("role") == "user"
        ),
        None,
    )
    if first_user is None or first_user >= len(chain):
        return None
    return Opening(chain.hash_at(first_user).hex(), chain.tokens[first_user])


@dataclass(frozen=True, slots=True)
class Opening:
    """A prompt's opening prefix: its fingerprint (element ``i`` is the tools and messages before ``i``)
    and its tokens."""

    name: str
    tokens: int


def anchor_of(chain: Chain, messages: Sequence[Mapping[str, Any]], *, cache_key: object = None) -> str:
    """The conversation's name, stable while its history grows: the client's ``prompt_cache_key`` when it
    sends one, else the fingerprint of its prefix up to its first user message (tools, system prompt and
    the user's opening message)."""
    if isinstance(cache_key, str) and cache_key:
        return "k" + hashlib.sha256(cache_key.encode()).hexdigest()[: 2 * HASH_BYTES]
    first_user = next(
        (
            index
            for index, message in enumerate(messages[:ANCHOR_WITHIN])
            if isinstance(message, Mapping) and message.get("role") == "user"
        ),
        min(len(messages), ANCHOR_WITHIN) - 1,
    )
    element = min(first_user + 1, len(chain) - 1)
    return "p" + chain.hash_at(element).hex()
