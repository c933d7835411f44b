"""Summaries in the cache, and the per-conversation index that lets a later turn find them.

A summary is stored under the name of the exact prefix it summarises (``keys.summary_key``). On a
later turn the old part has usually grown, so its own name is not in the cache yet; the index, stored
under the name of the conversation's first block, lists the prefixes (block count and name) that have
summaries, newest first. A request checks each listed prefix against the names it computed for its own
blocks, and reads the longest one it shares. Conversations that happen to share a first block share an
index: the check keeps them apart, and the bounded list only costs hits, never correctness.

A cached summary is a compaction: its parts in order (each one a summary message of the blocks after
the previous part, with its pinned quotes and the block kept verbatim inside its span), and the tool
outputs after its prefix that were excerpted when it was written, so that every turn reusing it sends
the same bytes. An entry of the earlier format (``blocks`` and ``text`` only) reads as one part.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from compressors.protocols import Cache
from compressors.summary.excerpts import Ref
from compressors.summary.keys import index_key, summary_key

INDEX_ENTRIES = 32
MAX_READS = 4
"""Summaries read per lookup at most (expired entries are skipped), besides the index itself."""


@dataclass(frozen=True, slots=True)
class Part:
    """One summary message: it replaces the blocks from the previous part's end up to ``blocks``."""

    blocks: int
    text: str
    """The cheap model's summary."""
    pinned: str = ""
    """The quotes of the user's own words placed before it (``pins.Pins.text``)."""
    pins: int = 0
    """How many messages ``pinned`` quotes."""
    pinned_tokens: int = 0
    kept: tuple[int, ...] = ()
    """Blocks of its span whose first message (the last user message when it was written) stays
    verbatim in place."""


@dataclass(frozen=True, slots=True)
class CachedSummary:
    """The compaction of the first ``blocks`` blocks of a conversation."""

    blocks: int
    parts: tuple[Part, ...]
    excerpted: tuple[Ref, ...] = ()
    """Tool outputs after the prefix cut to excerpts by the cap, as (block, place in block)."""

    @classmethod
    def single(cls, blocks: int, text: str) -> CachedSummary:
        return cls(blocks=blocks, parts=(Part(blocks=blocks, text=text),))

    @property
    def kept(self) -> tuple[int, ...]:
        return tuple(block for part in self.parts for block in part.kept)


class SummaryStore:
    def __init__(self, cache: Cache, *, ttl_seconds: int) -> None:
        self._cache = cache
        self._ttl = ttl_seconds

    async def load(self, prefix: str, *, blocks: int) -> CachedSummary | None:
        raw = await self._cache.get(summary_key(prefix))
        if raw is None:
            return None
        try:
            value = orjson.loads(raw)
        except orjson.JSONDecodeError:
            return None  # an unreadable entry is a miss; the next save overwrites it
        if not isinstance(value, dict) or value.get("blocks") != blocks:
            return None
        return decode(value, blocks)

    async def save(self, hashes: Sequence[str], summary: CachedSummary) -> None:
        """Store ``summary`` under its prefix's name and list it first in the conversation's index."""
        prefix = hashes[summary.blocks]
        await self._cache.set(summary_key(prefix), encode(summary), ttl_seconds=self._ttl)
        entries = [entry for entry in await self._index(hashes[1]) if entry[1] != prefix]
        entries.insert(0, (summary.blocks, prefix))
        await self._cache.set(
            index_key(hashes[1]), orjson.dumps(entries[:INDEX_ENTRIES]), ttl_seconds=self._ttl
        )

    async def find_longest(self, hashes: Sequence[str], *, upto: int) -> CachedSummary | None:
        """The cached summary of the longest prefix ``blocks[:n]``, ``n <= upto``, of this request."""
        if upto < 1:
            return None
        listed = {
            count
            for count, name in await self._index(hashes[1])
            if 1 <= count <= upto and hashes[count] == name
        }
        candidates = sorted(listed | {upto}, reverse=True)[:MAX_READS]
        for count in candidates:
            found = await self.load(hashes[count], blocks=count)
            if found is not None:
                return found
        return None

    async def _index(self, anchor: str) -> list[tuple[int, str]]:
        raw = await self._cache.get(index_key(anchor))
        if raw is None:
            return []
        try:
            value = orjson.loads(raw)
        except orjson.JSONDecodeError:
            return []  # an unreadable index is empty; the next save rewrites it
        if not isinstance(value, list):
            return []
        return [
            (entry[0], entry[1])
            for entry in value
            if isinstance(entry, list)
            and len(entry) == 2
            and isinstance(entry[0], int)
            and isinstance(entry[1], str)
        ]


def encode(summary: CachedSummary) -> bytes:
    parts = [
        {
            "blocks": part.blocks,
            "text": part.text,
            "pinned": part.pinned,
            "pins": part.pins,
            "pinned_tokens": part.pinned_tokens,
            "kept": list(part.kept),
        }
        for part in summary.parts
    ]
    excerpted = [list(ref) for ref in summary.excerpted]
    return orjson.dumps({"blocks": summary.blocks, "parts": parts, "excerpted": excerpted})


def decode(value: dict[str, Any], blocks: int) -> CachedSummary | None:
    """The summary in a stored value of ``blocks`` blocks; None when the value is malformed."""
    if "parts" not in value:
        text = value.get("text")
        return CachedSummary.single(blocks, text) if isinstance(text, str) else None
    raw_parts, raw_refs = value.get("parts"), value.get("excerpted", [])
    if not isinstance(raw_parts, list) or not raw_parts or not isinstance(raw_refs, list):
        return None
    parts = [_part(raw) for raw in raw_parts]
    refs = [_ref(raw) for raw in raw_refs]
    if any(part is None for part in parts) or any(ref is None for ref in refs):
        return None
    ends = [part.blocks for part in parts if part is not None]
    if ends != sorted(set(ends)) or ends[0] < 1 or ends[-1] != blocks:
        return None
    return CachedSummary(
        blocks=blocks,
        parts=tuple(part for part in parts if part is not None),
        excerpted=tuple(ref for ref in refs if ref is not None),
    )


def _part(raw: Any) -> Part | None:
    if not isinstance(raw, dict):
        return None
    text, pinned, kept = raw.get("text"), raw.get("pinned", ""), raw.get("kept", [])
    numbers = [raw.get("blocks"), raw.get("pins", 0), raw.get("pinned_tokens", 0)]
    if not (isinstance(text, str) and isinstance(pinned, str) and isinstance(kept, list)):
        return None
    if not all(map(_is_int, [*numbers, *kept])):
        return None
    blocks, pins, tokens = (int(number) for number in numbers)
    return Part(blocks=blocks, text=text, pinned=pinned, pins=pins, pinned_tokens=tokens, kept=tuple(kept))


def _ref(raw: Any) -> Ref | None:
    if isinstance(raw, list) and len(raw) == 2 and all(map(_is_int, raw)) and min(raw) >= 0:
        return raw[0], raw[1]
    return None


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
