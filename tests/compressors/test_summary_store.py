from __future__ import annotations

import orjson
import pytest

from compressors.summary.keys import index_key, summary_key
from compressors.summary.store import INDEX_ENTRIES, CachedSummary, SummaryStore
from tests.compressors.test_summary_fakes import DictCache

HASHES = [f"h{n}" for n in range(40)]


@pytest.mark.anyio
async def test_store_finds_the_longest_listed_prefix_this_request_shares() -> None:
    cache = DictCache()
    store = SummaryStore(cache, ttl_seconds=60)
    for blocks in (3, 7, 12):
        await store.save(HASHES, CachedSummary(blocks=blocks, text=f"s{blocks}"))
    assert await store.find_longest(HASHES, upto=20) == CachedSummary(12, "s12")
    assert await store.find_longest(HASHES, upto=11) == CachedSummary(7, "s7")
    other = [*HASHES[:5], *(f"x{n}" for n in range(5, 40))]
    assert await store.find_longest(other, upto=20) == CachedSummary(3, "s3")
    assert await store.find_longest(HASHES, upto=2) is None
    assert await store.find_longest(HASHES, upto=0) is None


@pytest.mark.anyio
async def test_store_index_lists_newest_first_without_duplicates_and_is_bounded() -> None:
    cache = DictCache()
    store = SummaryStore(cache, ttl_seconds=60)
    for blocks in [*range(1, 40), 5]:
        await store.save(HASHES, CachedSummary(blocks=blocks, text="s"))
    entries = orjson.loads(cache.values[index_key("h1")][0])
    assert len(entries) == INDEX_ENTRIES
    assert entries[0] == [5, "h5"] and entries[1] == [39, "h39"]
    assert len({name for _, name in entries}) == INDEX_ENTRIES


@pytest.mark.anyio
async def test_store_probes_the_exact_prefix_even_when_the_index_is_lost() -> None:
    cache = DictCache()
    store = SummaryStore(cache, ttl_seconds=60)
    await store.save(HASHES, CachedSummary(blocks=9, text="s9"))
    del cache.values[index_key("h1")]
    assert await store.find_longest(HASHES, upto=9) == CachedSummary(9, "s9")
    assert await store.find_longest(HASHES, upto=10) is None


@pytest.mark.anyio
async def test_store_skips_an_expired_summary_and_takes_the_next_longest() -> None:
    cache = DictCache()
    store = SummaryStore(cache, ttl_seconds=60)
    await store.save(HASHES, CachedSummary(blocks=4, text="s4"))
    await store.save(HASHES, CachedSummary(blocks=8, text="s8"))
    del cache.values[summary_key("h8")]
    assert await store.find_longest(HASHES, upto=8) == CachedSummary(4, "s4")


@pytest.mark.anyio
@pytest.mark.parametrize(
    "raw",
    [b"not json", b"[1, 2]", b'{"blocks": 5, "text": "x"}', b'{"blocks": 4, "text": 7}'],
)
async def test_store_treats_an_unreadable_or_mismatched_entry_as_a_miss(raw: bytes) -> None:
    cache = DictCache()
    await cache.set(summary_key("h4"), raw, ttl_seconds=60)
    assert await SummaryStore(cache, ttl_seconds=60).load("h4", blocks=4) is None


@pytest.mark.anyio
@pytest.mark.parametrize(
    "raw",
    [b"not json", b'{"a": 1}', b'[[4, "h4", 1], ["4", "h4"], [0, "h0"], [-1, "h39"], 7, [99, "h99"]]'],
)
async def test_store_ignores_an_unreadable_index_or_bad_entries(raw: bytes) -> None:
    cache = DictCache()
    store = SummaryStore(cache, ttl_seconds=60)
    for blocks in (4, 39):
        await cache.set(
            summary_key(f"h{blocks}"), orjson.dumps({"blocks": blocks, "text": "s"}), ttl_seconds=60
        )
    await cache.set(index_key("h1"), raw, ttl_seconds=60)
    assert await store.find_longest(HASHES, upto=10) is None
    await store.save(HASHES, CachedSummary(blocks=6, text="s6"))
    assert await store.find_longest(HASHES, upto=10) == CachedSummary(6, "s6")
