from __future__ import annotations

import orjson
import pytest

from compressors.summary.keys import index_key, summary_key
from compressors.summary.store import INDEX_ENTRIES, CachedSummary, Part, SummaryStore
from tests.compressors.test_summary_fakes import DictCache

HASHES = [f"h{n}" for n in range(40)]


@pytest.mark.anyio
async def test_store_finds_the_longest_listed_prefix_this_request_shares() -> None:
    cache = DictCache()
    store = SummaryStore(cache, ttl_seconds=60)
    for blocks in (3, 7, 12):
        await store.save(HASHES, CachedSummary.single(blocks, f"s{blocks}"))
    assert await store.find_longest(HASHES, upto=20) == CachedSummary.single(12, "s12")
    assert await store.find_longest(HASHES, upto=11) == CachedSummary.single(7, "s7")
    other = [*HASHES[:5], *(f"x{n}" for n in range(5, 40))]
    assert await store.find_longest(other, upto=20) == CachedSummary.single(3, "s3")
    assert await store.find_longest(HASHES, upto=2) is None
    assert await store.find_longest(HASHES, upto=0) is None


@pytest.mark.anyio
async def test_store_index_lists_newest_first_without_duplicates_and_is_bounded() -> None:
    cache = DictCache()
    store = SummaryStore(cache, ttl_seconds=60)
    for blocks in [*range(1, 40), 5]:
        await store.save(HASHES, CachedSummary.single(blocks, "s"))
    entries = orjson.loads(cache.values[index_key("h1")][0])
    assert len(entries) == INDEX_ENTRIES
    assert entries[0] == [5, "h5"] and entries[1] == [39, "h39"]
    assert len({name for _, name in entries}) == INDEX_ENTRIES


@pytest.mark.anyio
async def test_store_probes_the_exact_prefix_even_when_the_index_is_lost() -> None:
    cache = DictCache()
    store = SummaryStore(cache, ttl_seconds=60)
    await store.save(HASHES, CachedSummary.single(9, "s9"))
    del cache.values[index_key("h1")]
    assert await store.find_longest(HASHES, upto=9) == CachedSummary.single(9, "s9")
    assert await store.find_longest(HASHES, upto=10) is None


@pytest.mark.anyio
async def test_store_skips_an_expired_summary_and_takes_the_next_longest() -> None:
    cache = DictCache()
    store = SummaryStore(cache, ttl_seconds=60)
    await store.save(HASHES, CachedSummary.single(4, "s4"))
    await store.save(HASHES, CachedSummary.single(8, "s8"))
    del cache.values[summary_key("h8")]
    assert await store.find_longest(HASHES, upto=8) == CachedSummary.single(4, "s4")


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
    await store.save(HASHES, CachedSummary.single(6, "s6"))
    assert await store.find_longest(HASHES, upto=10) == CachedSummary.single(6, "s6")


FULL = CachedSummary(
    blocks=9,
    parts=(
        Part(blocks=4, text="s4", pinned="quotes", pins=2, pinned_tokens=30, kept=(0,)),
        Part(blocks=9, text="s9"),
    ),
    excerpted=((9, 1), (11, 1)),
)


@pytest.mark.anyio
async def test_store_keeps_parts_pins_kept_blocks_and_excerpts() -> None:
    cache = DictCache()
    store = SummaryStore(cache, ttl_seconds=60)
    await store.save(HASHES, FULL)
    assert await store.find_longest(HASHES, upto=12) == FULL
    assert FULL.kept == (0,)


def _part(**overrides: object) -> dict[str, object]:
    return {"blocks": 9, "text": "s", "pinned": "", "pins": 0, "pinned_tokens": 0, "kept": [], **overrides}


@pytest.mark.anyio
@pytest.mark.parametrize(
    "value",
    [
        {"blocks": 9, "parts": []},
        {"blocks": 9, "parts": "s"},
        {"blocks": 9, "parts": [_part()], "excerpted": {}},
        {"blocks": 9, "parts": [7]},
        {"blocks": 9, "parts": [_part(blocks=8)]},
        {"blocks": 9, "parts": [_part(blocks=0), _part()]},
        {"blocks": 9, "parts": [_part(blocks=5), _part(blocks=5), _part()]},
        {"blocks": 9, "parts": [_part(text=None)]},
        {"blocks": 9, "parts": [_part(pinned=3)]},
        {"blocks": 9, "parts": [_part(kept="0")]},
        {"blocks": 9, "parts": [_part(kept=[True])]},
        {"blocks": 9, "parts": [_part(pins="2")]},
        {"blocks": 9, "parts": [_part()], "excerpted": [[1]]},
        {"blocks": 9, "parts": [_part()], "excerpted": [[1, -1]]},
    ],
)
async def test_store_treats_a_malformed_compaction_as_a_miss(value: dict[str, object]) -> None:
    cache = DictCache()
    await cache.set(summary_key("h9"), orjson.dumps(value), ttl_seconds=60)
    assert await SummaryStore(cache, ttl_seconds=60).load("h9", blocks=9) is None


@pytest.mark.anyio
async def test_store_reads_a_compaction_without_optional_fields() -> None:
    cache = DictCache()
    value = {"blocks": 9, "parts": [{"blocks": 9, "text": "s"}]}
    await cache.set(summary_key("h9"), orjson.dumps(value), ttl_seconds=60)
    assert await SummaryStore(cache, ttl_seconds=60).load("h9", blocks=9) == CachedSummary.single(9, "s")
