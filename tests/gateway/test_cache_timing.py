"""The warning band with the cache counted, through the app: deferred while warm, compressed at the crossing
or when cold, and a compacted prefix reused byte for byte afterwards."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.gateway.test_compression_pipeline import (
    Upstream,
    compression_config,
    grown,
    history,
    sent_summary,
    serving,
    tokens_of,
)


def deferred_config(tenant: str, *, keep_recent_tokens: int | None = None, **cache: Any) -> dict[str, Any]:
    """``keep_recent_tokens``: a large aim makes a compaction too large to pay while the cache is warm."""
    extra = {} if keep_recent_tokens is None else {"keep_recent_tokens": keep_recent_tokens}
    config = compression_config(tenant, timing="deferred", **extra)
    if cache:
        config["providers"]["mock"]["prompt_cache"] = cache
    return config


@pytest.mark.anyio
async def test_a_warm_conversation_is_forwarded_in_the_band_then_compacted_at_the_crossing_and_reused(
    tmp_path: Path, redis_url: str, tenant_name: str
) -> None:
    first = history(226)
    in_band = grown(first, 256_000)
    crossing = grown(in_band, 280_000, seed=5)
    after = grown(crossing, 290_000, seed=6)
    assert tokens_of(first) < 250_000 <= tokens_of(in_band) <= 272_000 < tokens_of(crossing)
    upstream = Upstream()
    config = deferred_config(tenant_name, keep_recent_tokens=70_000)
    async with serving(tmp_path, redis_url, upstream, config) as served:
        assert (await served.chat(first)).headers["x-gateway-action"] == "forward"
        await served.background_done()  # the conversation's state is written after the answer
        warm = await served.chat(in_band)
        await served.background_done()  # the summary for the crossing is prepared meanwhile
        prepared = len(upstream.cheap)
        compacted = await served.chat(crossing)
        crossing_calls = len(upstream.cheap) - prepared
        await served.background_done()
        reused = await served.chat(after)
        events = await served.events(tenant_name, 4)
    assert warm.headers["x-gateway-action"] == "forward"
    assert warm.headers["x-gateway-reason"].startswith("deferred: cache warm")
    assert "summary prepared for the crossing" in warm.headers["x-gateway-reason"]
    assert "warning line" in warm.headers["x-gateway-warning"]
    assert upstream.main[1]["messages"] == in_band and prepared > 0
    assert compacted.headers["x-gateway-action"] == "compress", compacted.text
    assert crossing_calls == 0  # the summary was ready
    assert int(compacted.headers["x-gateway-forwarded-tokens"]) <= 272_000
    assert reused.headers["x-gateway-action"] == "compress"
    sent_then, sent_now = upstream.main[2]["messages"], upstream.main[3]["messages"]
    assert sent_summary(sent_then) and len(upstream.cheap) == prepared  # no new summary: reused
    assert orjson.dumps(sent_now[: len(sent_then) - 1]) == orjson.dumps(sent_then[:-1])  # byte for byte
    reasons = {event.id: event.reason for event in events}
    assert reasons[warm.headers["x-gateway-request-id"]] == warm.headers["x-gateway-reason"]


@pytest.mark.anyio
async def test_a_warm_conversation_is_compressed_in_the_band_when_a_small_compaction_pays_now(
    tmp_path: Path, redis_url: str, tenant_name: str
) -> None:
    """About 29K tokens sent uncached cost less than a 256K prompt served from the cache (its 31K new
    tokens at full price): compressing now is the cheaper way, and the reason says so."""
    first = history(226)
    upstream = Upstream()
    async with serving(tmp_path, redis_url, upstream, deferred_config(tenant_name)) as served:
        await served.chat(first)
        await served.background_done()
        answer = await served.chat(grown(first, 256_000))
    assert answer.headers["x-gateway-action"] == "compress", answer.text
    assert answer.headers["x-gateway-reason"].startswith("compressed: it pays now (forward $")


@pytest.mark.anyio
async def test_a_warm_growing_chat_is_compacted_below_the_warning_line_and_stays_compacted(
    tmp_path: Path, redis_url: str, tenant_name: str
) -> None:
    """A chat of about 100K tokens growing 8K a turn: resending its history, even cached, costs more
    over the turns it can be expected to go on than one compaction with its summary calls."""
    first = history(100)
    growing = grown(first, 106_000)
    later = grown(growing, 116_000, seed=7)
    assert tokens_of(first) < 100_000 < tokens_of(growing) < tokens_of(later) < 250_000
    upstream = Upstream()
    async with serving(tmp_path, redis_url, upstream, deferred_config(tenant_name)) as served:
        assert (await served.chat(first)).headers["x-gateway-action"] == "forward"
        await served.background_done()
        compacted = await served.chat(growing)
        await served.background_done()
        calls = len(upstream.cheap)
        kept = await served.chat(later)
    assert compacted.headers["x-gateway-action"] == "compress", compacted.text
    reason = compacted.headers["x-gateway-reason"]
    assert reason.startswith("compacted early: it pays (forward $")
    assert "branch back to an earlier turn resends its history uncached" in reason
    assert calls > 0 and sent_summary(upstream.main[1]["messages"])
    assert kept.headers["x-gateway-action"] == "compress", kept.text
    assert "compacted prefix is kept" in kept.headers["x-gateway-reason"]
    assert len(upstream.cheap) == calls  # reused as it is: no new summary
    assert (
        upstream.main[2]["messages"][: len(upstream.main[1]["messages"]) - 1]
        == (upstream.main[1]["messages"][:-1])
    )


@pytest.mark.anyio
async def test_a_conversation_idle_past_the_retention_is_compressed_in_the_band(
    tmp_path: Path, redis_url: str, tenant_name: str
) -> None:
    first = history(226)
    in_band = grown(first, 256_000)
    upstream = Upstream()
    config = deferred_config(tenant_name, retention_seconds=0.5)
    async with serving(tmp_path, redis_url, upstream, config) as served:
        await served.chat(first)
        await served.background_done()
        await asyncio.sleep(0.6)  # the provider's cache of the conversation has expired
        cold = await served.chat(in_band)
    assert cold.headers["x-gateway-action"] == "compress", cold.text
    # its state outlives the provider's cache: the gateway knows the conversation went cold
    assert "the cache has gone cold" in cold.headers["x-gateway-reason"]


@pytest.mark.anyio
async def test_a_new_conversation_entering_the_band_is_compressed_and_says_why(
    tmp_path: Path, redis_url: str, tenant_name: str
) -> None:
    upstream = Upstream()
    async with serving(tmp_path, redis_url, upstream, deferred_config(tenant_name)) as served:
        answer = await served.chat(grown(history(226), 256_000))
    assert answer.headers["x-gateway-action"] == "compress"
    assert "no warm cache known" in answer.headers["x-gateway-reason"]


@pytest.mark.anyio
async def test_a_clients_own_compaction_is_forwarded_unchanged_under_the_cliff(
    tmp_path: Path, redis_url: str, tenant_name: str
) -> None:
    request = grown(history(226), 256_000)
    request[-1] = {
        "role": "user",
        "content": "You are performing a CONTEXT CHECKPOINT COMPACTION. Create a handoff summary.",
    }
    upstream = Upstream()
    async with serving(tmp_path, redis_url, upstream, deferred_config(tenant_name)) as served:
        answer = await served.chat(request)
    assert answer.headers["x-gateway-action"] == "forward"
    assert upstream.main[-1]["messages"] == request and not upstream.cheap
