"""The kept excerpts: a part of the excerpts chosen once per document and sent byte-identical after.

A provider caches the longest common prefix of consecutive requests. Excerpts picked afresh for each
question in document order change the request early (the first excerpt that differs), so a
conversation of questions about one long document would pay nearly every excerpt at the full input
price, where forwarding the document unchanged is served almost wholly from the cache.

So each document's excerpts come in two parts: first the **kept** excerpts, chosen by the question
that first excerpted the document (its best-ranked chunks, within ``stable_share`` of the room for
excerpts) and remembered per document in the tenant's Cache (by the documents' index keys, never
their text), then the excerpts chosen for the latest question among the other chunks. Later questions
about the same document send the same kept part, so the request up to its end is the same bytes as
before and cached.

The kept part is chosen again (a deliberate cache rewrite) only when it no longer fits (a smaller
budget, a longer skeleton), when it takes less than half its share of the room (a larger budget), when
the document changed (another index) or when it is forgotten (no question about the document for the
Cache's TTL, by when the provider's cache is long cold too). What it holds does not change what the
cache saves, only what the later questions see besides their own excerpts; so it is not rewritten for
being less relevant to them (that would cost a rewrite and save nothing).

``expected_stable_tokens`` gives the figure needed to price retrieval against forwarding with a warm
cache, without running the retriever.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

import orjson

from compressors.lru import Lru
from compressors.protocols import Cache

FORMAT_VERSION = 1


@dataclass(frozen=True, slots=True)
class Kept:
    """The kept chunks of each document of a request (chunk numbers, ascending), and each document's
    chunk count when they were chosen (a check that the index is the same)."""

    chunks: tuple[tuple[int, ...], ...]
    sizes: tuple[int, ...]

    def valid_for(self, sizes: Sequence[int]) -> bool:
        return tuple(sizes) == self.sizes and all(
            all(0 <= chunk < size for chunk in chunks)
            for chunks, size in zip(self.chunks, sizes, strict=True)
        )


def kept_key(index_keys: Sequence[str]) -> str:
    """The Cache key of the kept chunks of a request whose documents have these index keys (in order)."""
    digest = hashlib.sha256(f"v{FORMAT_VERSION}".encode())
    for key in index_keys:
        digest.update(b"\0" + key.encode())
    return f"retrieval:kept:{digest.hexdigest()}"


def encode_kept(kept: Kept) -> bytes:
    return orjson.dumps({"chunks": [list(chunks) for chunks in kept.chunks], "sizes": list(kept.sizes)})


def decode_kept(data: bytes) -> Kept | None:
    """None when ``data`` is not a record of this format (damage, another version)."""
    try:
        value = orjson.loads(data)
        chunks = tuple(tuple(int(chunk) for chunk in part) for part in value["chunks"])
        sizes = tuple(int(size) for size in value["sizes"])
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        return None
    return Kept(chunks, sizes) if len(chunks) == len(sizes) else None


class KeptStore:
    """The kept chunks by key: in the shared Cache when there is one (so every replica sends the same
    bytes), else in this process's memory."""

    def __init__(self, *, cache: Cache | None, memory_entries: int, ttl_seconds: int) -> None:
        self._cache = cache
        self._memory: Lru[Kept] = Lru(memory_entries)
        self._ttl = ttl_seconds

    async def get(self, key: str) -> Kept | None:
        if self._cache is None:
            return self._memory.get(key)
        data = await self._cache.get(key)
        return decode_kept(data) if data is not None else None

    async def put(self, key: str, kept: Kept) -> None:
        if self._cache is None:
            self._memory.put(key, kept)
        else:
            await self._cache.set(key, encode_kept(kept), ttl_seconds=self._ttl)


def expected_stable_tokens(*, budget_tokens: int, skeleton_tokens: int, stable_share: float) -> int:
    """About how many tokens of a later question's retrieved request are the kept excerpts: the part the
    provider serves from its cache (with whatever precedes the first document, e.g. the system prompt).

    ``skeleton_tokens`` is what the request keeps besides its documents' excerpts (system prompt, turns,
    question); the excerpts fill at most ``budget_tokens - skeleton_tokens`` and the kept part takes up
    to ``stable_share`` of that (a little less: whole chunks, markers). The first question about a
    document has none of it cached; neither has a question after the provider's cache has expired.
    """
    room = max(0, budget_tokens - skeleton_tokens)
    return int(room * min(max(stable_share, 0.0), 1.0))
