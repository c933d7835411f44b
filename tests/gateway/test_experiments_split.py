"""Split experiments: a share of conversations goes to the candidate, decided once per conversation and
remembered in a real Redis; the upstream is mocked at the HTTP boundary (respx)."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import redis.asyncio as aioredis
import respx
from redis.exceptions import RedisError

from gateway.config.experiments import Watch
from gateway.config.schema.experiments import ExperimentConfig
from gateway.experiments.split import NewConversation, assign, conversation_key, fresh_arm, remember
from gateway.experiments.store import ExperimentKeys
from gateway.experiments.trouble import kind_of
from gateway.sampling.decide import sample_fraction
from tests.factories import UPSTREAM, chat_body, completion, gateway_client, make_config
from tests.gateway.experiment_factories import NOW_MS

pytestmark = pytest.mark.usefixtures("experiments_flush_often")


@pytest.fixture
def router() -> respx.Router:
    return respx.Router(assert_all_called=False)


def split_config(name: str, **experiment: Any) -> dict[str, Any]:
    config = make_config()
    config["experiments"] = {
        name: {
            "mode": "split",
            "primary": "gpt-5.4",
            "candidate": "gpt-5.2",
            "sample_rate": 0.5,
            **experiment,
        }
    }
    return config


def conversation(opening: str, turns: int) -> list[list[dict[str, str]]]:
    """The message lists of a conversation's turns, each the previous one plus an answer and a question."""
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": opening}]
    lists = [list(messages)]
    for turn in range(1, turns):
        messages += [
            {"role": "assistant", "content": f"answer {turn}"},
            {"role": "user", "content": f"more {turn}"},
        ]
        lists.append(list(messages))
    return lists


def test_every_turn_of_a_conversation_stays_on_the_model_it_started_on(
    tmp_path: Path, redis_url: str, router: respx.Router
) -> None:
    name = f"split-{uuid.uuid4().hex[:8]}"
    route = router.post(f"{UPSTREAM}/chat/completions").mock(
        side_effect=lambda request: httpx.Response(
            200, json=completion(model=orjson.loads(request.content)["model"])
        )
    )
    expected: dict[str, str] = {}
    for number in range(1_000):  # six conversations the split sends each way (the name is random)
        opening = f"conversation {number} {name}"
        first = conversation(opening, 1)[0]
        key = conversation_key("acme", chat_body(messages=first), first)
        model = "gpt-5.2" if sample_fraction(f"{name}\x00{key}") < 0.5 else "gpt-5.4"
        if list(expected.values()).count(model) < 6:
            expected[opening] = model
        if len(expected) == 12:
            break
    arms: dict[str, set[str]] = {}
    with gateway_client(tmp_path, redis_url, router, config=split_config(name)) as client:
        for opening in expected:
            for messages in conversation(opening, 3):
                response = client.post("/v1/chat/completions", json=chat_body(messages=messages))
                assert response.status_code == 200
                model = response.headers["x-gateway-model"]
                experiment = response.headers["x-gateway-experiment"]
                assert experiment == f"{name}; arm={'candidate' if model == 'gpt-5.2' else 'primary'}"
                arms.setdefault(opening, set()).add(model)
    assert arms == {opening: {model} for opening, model in expected.items()}  # never a change mid-way
    sent = [orjson.loads(call.request.content)["model"] for call in route.calls]
    assert sent.count("gpt-5.2") == 3 * sum(1 for models in arms.values() if models == {"gpt-5.2"})


def test_a_conversation_is_known_by_its_cache_key_before_its_opening(
    tmp_path: Path, redis_url: str, router: respx.Router
) -> None:
    name = f"keyed-{uuid.uuid4().hex[:8]}"
    router.post(f"{UPSTREAM}/chat/completions").mock(return_value=httpx.Response(200, json=completion()))
    seen: set[str] = set()
    with gateway_client(tmp_path, redis_url, router, config=split_config(name)) as client:
        for number in range(6):  # six different openings, one prompt_cache_key: one conversation
            body = chat_body(messages=[{"role": "user", "content": f"q{number}"}], prompt_cache_key="agent-7")
            seen.add(client.post("/v1/chat/completions", json=body).headers["x-gateway-model"])
    assert len(seen) == 1


def test_requests_of_other_models_and_unmatched_tenants_are_not_split(
    tmp_path: Path, redis_url: str, router: respx.Router
) -> None:
    name = f"scoped-{uuid.uuid4().hex[:8]}"
    router.post(f"{UPSTREAM}/chat/completions").mock(return_value=httpx.Response(200, json=completion()))
    config = split_config(name, sample_rate=1.0, match={"tenants": ["globex"]})
    with gateway_client(tmp_path, redis_url, router, config=config) as client:
        response = client.post("/v1/chat/completions", json=chat_body())
        other = client.post("/v1/chat/completions", json=chat_body(model="small"))
    assert response.headers["x-gateway-model"] == "gpt-5.4" and "x-gateway-experiment" not in response.headers
    assert other.headers["x-gateway-model"] == "small" and "x-gateway-experiment" not in other.headers


def watch(name: str, **settings: Any) -> Watch:
    fields = {"mode": "split", "primary": ["gpt-5.4"], "candidate": "gpt-5.2", "sample_rate": 1.0, **settings}
    return Watch(name, ExperimentConfig.model_validate(fields))


async def arm_of(redis: aioredis.Redis, keys: ExperimentKeys, watch: Watch, conversation: str) -> str:
    """The arm as a request gets it, remembered as an admitted request's is."""
    assigned = await assign(redis, keys, watch, conversation, cap=1_000, now_ms=NOW_MS)
    if assigned.new is not None:
        await remember(redis, keys, assigned.new, now_ms=NOW_MS)
    return assigned.arm


@pytest.mark.anyio
async def test_rolling_back_keeps_started_conversations_on_the_candidate_until_forced_back(
    redis_client: aioredis.Redis,
) -> None:
    keys, name = ExperimentKeys(), f"rollback-{uuid.uuid4().hex[:8]}"
    started, fresh = "conversation-a", "conversation-b"
    assert await arm_of(redis_client, keys, watch(name), started) == "candidate"
    rolled_back = watch(name, sample_rate=0.0)
    assert await arm_of(redis_client, keys, rolled_back, started) == "candidate"  # finishes there
    assert await arm_of(redis_client, keys, rolled_back, fresh) == "primary"  # new ones: the primary
    assert await redis_client.exists(keys.assignment(name, fresh)) == 0  # nothing written while rolled back
    assert await arm_of(redis_client, keys, watch(name, enabled=False), started) == "candidate"
    assert await arm_of(redis_client, keys, watch(name, force_back=True), started) == "primary"
    # a share raised later never moves a conversation that started on the primary
    await redis_client.set(keys.assignment(name, "conversation-c"), "primary")
    assert await arm_of(redis_client, keys, watch(name, sample_rate=1.0), "conversation-c") == "primary"


@pytest.mark.anyio
async def test_the_first_arm_written_stays_and_is_counted_once(redis_client: aioredis.Redis) -> None:
    keys, name = ExperimentKeys(), f"first-{uuid.uuid4().hex[:8]}"
    first = await assign(redis_client, keys, watch(name), "conversation", cap=10, now_ms=NOW_MS)
    assert first.new is not None and first.arm == "candidate"
    assert await remember(redis_client, keys, first.new, now_ms=NOW_MS)
    other = NewConversation(name, "conversation", "primary", 3600)  # a concurrent first turn, decided apart
    assert not await remember(redis_client, keys, other, now_ms=NOW_MS)
    assert await redis_client.get(keys.assignment(name, "conversation")) == b"candidate"
    assert await redis_client.zcard(keys.assignments(name)) == 1
    again = await assign(redis_client, keys, watch(name), "conversation", cap=10, now_ms=NOW_MS)
    assert again.arm == "candidate" and again.new is None


@pytest.mark.anyio
async def test_an_unreachable_redis_is_told_apart_from_an_error(dead_redis: aioredis.Redis) -> None:
    with pytest.raises(RedisError) as caught:
        await assign(dead_redis, ExperimentKeys(), watch("down"), "conversation", cap=10, now_ms=NOW_MS)
    assert kind_of(caught.value) == "unreachable"


def test_the_share_of_conversations_sent_to_the_candidate_follows_the_rate() -> None:
    chosen = [fresh_arm(watch("share", sample_rate=0.2), f"c{number}") for number in range(5_000)]
    assert 0.17 < chosen.count("candidate") / len(chosen) < 0.23


def test_conversation_key_is_the_opening_not_the_latest_turn() -> None:
    first, *later = conversation("opening", 4)
    keys = {conversation_key("acme", {}, messages) for messages in (first, *later)}
    assert len(keys) == 1
    assert conversation_key("acme", {}, first) != conversation_key("globex", {}, first)  # per tenant
    assert conversation_key("acme", {"user": "u1"}, first) != conversation_key("acme", {}, first)


@pytest.mark.anyio
async def test_counters_and_pairs_wait_out_a_redis_outage(
    redis_client: aioredis.Redis, dead_redis: aioredis.Redis
) -> None:
    from gateway.experiments.store import add_pairs, add_traffic, read_pairs, read_traffic
    from gateway.experiments.tally import Tally

    keys, name = ExperimentKeys(), f"outage-{uuid.uuid4().hex[:8]}"
    target = {"redis": dead_redis}
    tally = Tally(
        lambda experiment, day, counts: add_traffic(target["redis"], keys, experiment, day, counts),
        lambda pairs: add_pairs(target["redis"], keys, pairs),
        every=3600,  # flushed by hand here
    )
    now_ms = 1_764_590_000_000
    tally.add(name, now_ms, "shadowed")
    tally.add_pair(name, {"v": 1, "id": "req_1"})
    await tally.flush()  # Redis refuses: everything is kept
    tally.add(name, now_ms, "shadowed")
    target["redis"] = redis_client
    await tally.aclose()
    assert await read_traffic(redis_client, keys, name, ["2025-12-01"]) == {"shadowed": 2}
    assert [pair["id"] for pair in await read_pairs(redis_client, keys, name, since_ms=0)] == ["req_1"]


def test_a_split_request_leaves_a_pair_of_its_arm_saying_whether_it_offered_tools(
    tmp_path: Path, redis_url: str, router: respx.Router
) -> None:
    from tests.gateway.test_experiments_shadow import pairs_of, wait_for

    name = f"paired-{uuid.uuid4().hex[:8]}"
    router.post(f"{UPSTREAM}/chat/completions").mock(return_value=httpx.Response(200, json=completion()))
    tools = [{"type": "function", "function": {"name": "search", "parameters": {"type": "object"}}}]
    with gateway_client(tmp_path, redis_url, router, config=split_config(name, sample_rate=1.0)) as client:
        response = client.post("/v1/chat/completions", json=chat_body(tools=tools))
        [pair] = wait_for(lambda: pairs_of(redis_url, name))
    assert response.headers["x-gateway-experiment"] == f"{name}; arm=candidate"
    assert (pair["mode"], pair["arm"], pair["tools"]) == ("split", "candidate", True)
    assert pair["primary"] is None and pair["candidate"]["model"] == "gpt-5.2"
