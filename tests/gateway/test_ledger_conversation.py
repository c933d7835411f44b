"""A cost event names the conversation its request belongs to, as the gateway knows it (a fingerprint of
its opening, never text): every turn of one conversation carries the same name, another conversation
another, and a request too small to be tracked none."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from tests.gateway.test_compression_pipeline import Upstream, compression_config, grown, history, serving

pytestmark = pytest.mark.redis


@pytest.mark.anyio
async def test_cost_events_carry_the_conversation_of_their_request(
    tmp_path: Path, redis_url: str, tenant_name: str
) -> None:
    first = history(4)
    second = grown(first, 6_000)
    other = [{"role": "system", "content": "You review contracts."}, *first[1:]]
    small = [{"role": "user", "content": "Hello"}]
    config = compression_config(tenant_name)
    config["limits"] = {"track_conversations_from": 2_000}
    async with serving(tmp_path, redis_url, Upstream(), config) as served:
        answers = []
        for messages in (first, second, other, small):
            answers.append(await served.chat(messages))
            await served.background_done()
        events = await served.events(tenant_name, 4)
    named = {event.id: event.conversation for event in events}
    ids = [answer.headers["x-gateway-request-id"] for answer in answers]
    assert named[ids[0]] is not None and named[ids[0]] == named[ids[1]]
    assert named[ids[2]] is not None and named[ids[2]] != named[ids[0]]
    assert named[ids[3]] is None
    assert {event.band for event in events} == {"below_warning"}
    for text in ("You review contracts", first[1]["content"][:40]):
        assert all(text not in (name or "") for name in named.values())
    assert orjson.loads(events[0].to_json())["conversation"] == events[0].conversation
