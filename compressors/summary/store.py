"""Summaries in the cache, and the per-conversation index that lets a later turn find them.

A summary is stored under the name of the exact prefix it summarises (``keys.summary_key``). On a
later turn the old part has usually grown, so its own name is not in the cache yet; the index, stored
under the name of the conversation's first block, lists the prefixes (block count and name) that have
summaries, newest first. A request checks each listed prefix against the names it computed for its own
blocks, and reads the longest one it shares. Conversations that happen to share a first block share an
index: the check keeps them apart, and the bounded list only costs hits, never correctness.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import orjson

from compressors.protocols import Cache
from compressors.summary.keys import index_key, summary_key

INDEX_ENTRIES = 32
MAX_READS = 4
"""Summaries read per lookup at most (expired entries are skipped), besides the index itself."""


@dataclass(frozen=True, slots=True)
class CachedSummary:
    """The summary of the first ``blocks`` blocks of a conversation."""

    blocks: int
    text: str


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
        if (
            not isinstance(value, dict)
            or value.get("blocks") != blocks
            or not isinstance(value.get("text"), str)
        ):
            return None
        return CachedSummary(blocks=blocks, text=value["text"])

    async def save(self, hashes: Sequence[str], summary: CachedSummary) -> None:
        """Store ``summary`` under its prefix's name and list it first in the conversation's index."""
        prefix = hashes[summary.blocks]
        value = orjson.dumps({"blocks": summary.blocks, "text": summary.text})
        await self._cache.set(summary_key(prefix), value, ttl_seconds=self._ttl)
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
