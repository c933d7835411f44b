"""Rate limits against a real Redis: the counters' accounting over a minute (a clock the test moves),
settling tokens and dollars, limits per model within a tenant and per key, exact admission under
concurrency through two replicas, and a Redis that is down."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import redis.asyncio as aioredis

from gateway.base.errors import RateLimited, ServiceUnavailable
from gateway.base.headroom import duration, moment
from gateway.base.record import RequestRecord
from gateway.base.types import Tenant, Usage
from gateway.config.rate_limits import Applicable, LimitSet, Scoped, limits_for, rate_book
from gateway.config.schema.root import GatewayConfig
from gateway.ratelimits.limiter import RATE_HOLD, Demand, RateHold, RateLimiter
from gateway.ratelimits.settler import RateSettler
from tests.factories import OTHER_KEY, TENANT_KEY, make_config

START = 1_800_000_000.0


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> float:
        return self.now


def limiter(redis: aioredis.Redis, clock: Clock | None = None) -> RateLimiter:
    return RateLimiter(redis, clock=clock)


def applying(tenant: str, *sets: tuple[str, LimitSet], fails_open: bool = False) -> Applicable:
    return Applicable(tenant=tenant, sets=sets, fails_open=fails_open)


ONE = Demand(tokens=0, nanos=0)


@pytest.mark.anyio
async def test_ratelimits_requests_refill_over_the_minute(
    redis_client: aioredis.Redis, tenant_name: str
) -> None:
    clock = Clock()
    limits = limiter(redis_client, clock)
    five = applying(tenant_name, ("tenant", LimitSet(requests=5)))
    held = [await limits.admit(five, ONE) for _ in range(5)]
    assert [
        hold.headroom.requests.remaining for hold in held if hold.headroom and hold.headroom.requests
    ] == [
        4,
        3,
        2,
        1,
        0,
    ]
    with pytest.raises(RateLimited) as refused:
        await limits.admit(five, ONE)
    assert refused.value.retry_after_ms == 12_000  # one request back every 60 / 5 s
    assert refused.value.headers()["retry-after"] == "12"
    assert refused.value.code == "rate_limit_exceeded" and refused.value.error_type == "requests"
    assert refused.value.headroom is not None and refused.value.headroom.requests is not None
    assert refused.value.headroom.requests.remaining == 0
    assert refused.value.headroom.requests.reset_seconds == 60

    clock.now += 11.999
    with pytest.raises(RateLimited) as still:
        await limits.admit(five, ONE)
    assert still.value.retry_after_ms == 1
    clock.now += 0.001
    hold = await limits.admit(five, ONE)
    assert hold.headroom is not None and hold.headroom.requests is not None
    assert hold.headroom.requests.remaining == 0

    clock.now += 60  # a whole minute unused: the counter is whole again, and its key is gone
    assert (await limits.admit(five, ONE)).headroom.requests.remaining == 4  # type: ignore[union-attr]


@pytest.mark.anyio
async def test_ratelimits_counter_keys_expire_when_whole(
    redis_client: aioredis.Redis, tenant_name: str
) -> None:
    limits = limiter(redis_client)  # the server's clock: the key's expiry is real time
    await limits.admit(applying(tenant_name, ("tenant", LimitSet(requests=600))), ONE)
    key = f"gw:{{{tenant_name}}}:rate:tenant:r"
    ttl = await redis_client.pttl(key)
    assert 0 < ttl <= 100  # 60 s / 600 requests: whole again in 100 ms


@pytest.mark.anyio
async def test_ratelimits_tokens_hold_then_settle_to_usage(
    redis_client: aioredis.Redis, tenant_name: str
) -> None:
    clock = Clock()
    limits = limiter(redis_client, clock)
    tokens = applying(tenant_name, ("tenant", LimitSet(tokens=1000)))
    first = await limits.admit(tokens, Demand(tokens=600, nanos=0))
    assert first.headroom is not None and first.headroom.tokens is not None
    assert first.headroom.tokens.remaining == 400
    with pytest.raises(RateLimited) as refused:
        await limits.admit(tokens, Demand(tokens=600, nanos=0))
    assert refused.value.error_type == "tokens"

    await limits.settle(first, tokens=100, nanos=0)  # 500 of the 600 held come back
    second = await limits.admit(tokens, Demand(tokens=600, nanos=0))
    assert second.headroom is not None and second.headroom.tokens is not None
    assert second.headroom.tokens.remaining == 300

    await limits.settle(second, tokens=900, nanos=0)  # 300 more than held are taken
    with pytest.raises(RateLimited):
        await limits.admit(tokens, Demand(tokens=1, nanos=0))


@pytest.mark.anyio
async def test_ratelimits_dollars_hold_then_settle_to_cost(
    redis_client: aioredis.Redis, tenant_name: str
) -> None:
    clock = Clock()
    limits = limiter(redis_client, clock)
    cent = 10_000_000
    dollars = applying(tenant_name, ("tenant", LimitSet(nanos=10 * cent)))
    first = await limits.admit(dollars, Demand(tokens=0, nanos=8 * cent))
    with pytest.raises(RateLimited) as refused:
        await limits.admit(dollars, Demand(tokens=0, nanos=3 * cent))
    assert "$0.1" in refused.value.message and "$0.03" in refused.value.message
    await limits.settle(first, tokens=0, nanos=cent)
    await limits.admit(dollars, Demand(tokens=0, nanos=9 * cent))
    with pytest.raises(RateLimited):
        await limits.admit(dollars, Demand(tokens=0, nanos=1))


@pytest.mark.anyio
async def test_ratelimits_a_request_above_the_limit_is_refused_for_good(
    redis_client: aioredis.Redis, tenant_name: str
) -> None:
    limits = limiter(redis_client, Clock())
    with pytest.raises(RateLimited) as refused:
        await limits.admit(
            applying(tenant_name, ("tenant", LimitSet(tokens=100))), Demand(tokens=101, nanos=0)
        )
    assert refused.value.headers()["x-should-retry"] == "false"
    assert "can never be admitted" in refused.value.message


@pytest.mark.anyio
async def test_ratelimits_a_refusal_takes_from_no_counter(
    redis_client: aioredis.Redis, tenant_name: str
) -> None:
    """A request refused by one limit leaves the others as they were (all or nothing)."""
    limits = limiter(redis_client, Clock())
    both = applying(tenant_name, ("tenant", LimitSet(requests=10)), ("model:m", LimitSet(requests=1)))
    await limits.admit(both, ONE)
    for _ in range(5):
        with pytest.raises(RateLimited):
            await limits.admit(both, ONE)
    tenant_only = applying(tenant_name, ("tenant", LimitSet(requests=10)))
    hold = await limits.admit(tenant_only, ONE)
    assert hold.headroom is not None and hold.headroom.requests is not None
    assert hold.headroom.requests.remaining == 8


def book_of(**tenants: Any) -> dict[str, Any]:
    return rate_book(GatewayConfig.model_validate(make_config(tenants=tenants)))


def key_id(key: str) -> str:
    from gateway.config.schema.root import hash_key

    return hash_key(key)[:12]


def test_ratelimits_limits_for_resolves_tenant_model_and_key_scopes() -> None:
    book = book_of(
        acme={
            "keys": [TENANT_KEY, {"key": OTHER_KEY, "rate_limits": {"requests_per_minute": 5}}],
            "rate_limits": {"tokens_per_minute": 1000, "models": {"small": {"requests_per_minute": 2}}},
        },
        globex={"keys": ["sk-globex"]},
    )
    assert limits_for(book, "globex", key_id("sk-globex"), "small") is None
    plain = limits_for(book, "acme", key_id(TENANT_KEY), "gpt-5.4")
    assert plain is not None and [scope for scope, _ in plain.sets] == ["tenant"]
    small = limits_for(book, "acme", key_id(OTHER_KEY), "small")
    assert small is not None
    assert dict(small.sets) == {
        "tenant": LimitSet(tokens=1000),
        "model:small": LimitSet(requests=2),
        f"key:{key_id(OTHER_KEY)}": LimitSet(requests=5),
    }
    assert not small.fails_open


def test_ratelimits_fail_open_follows_the_budget_unless_set() -> None:
    book = book_of(
        acme={"keys": [TENANT_KEY], "rate_limits": {"requests_per_minute": 1}, "budget": {
            "monthly_usd": 10, "on_redis_down": "open"}},
        globex={"keys": [OTHER_KEY], "rate_limits": {"requests_per_minute": 1, "on_redis_down": "closed"},
                "budget": {"monthly_usd": 10, "on_redis_down": "open"}},
    )  # fmt: skip
    assert book["acme"].fails_open and not book["globex"].fails_open


def test_ratelimits_config_refuses_unknown_models_and_keys_choosing_redis_down() -> None:
    with pytest.raises(ValueError, match="unknown model 'nope'"):
        book_of(acme={"keys": [TENANT_KEY], "rate_limits": {"models": {"nope": {"requests_per_minute": 1}}}})
    with pytest.raises(ValueError, match="on_redis_down is the tenant's"):
        book_of(
            acme={
                "keys": [
                    {"key": TENANT_KEY, "rate_limits": {"requests_per_minute": 1, "on_redis_down": "open"}}
                ]
            }
        )
    with pytest.raises(ValueError, match="give requests_per_minute"):
        book_of(acme={"keys": [TENANT_KEY], "rate_limits": {}})


@pytest.mark.anyio
async def test_ratelimits_per_model_within_a_tenant(redis_client: aioredis.Redis, tenant_name: str) -> None:
    book = book_of(
        **{
            tenant_name: {
                "keys": [TENANT_KEY],
                "rate_limits": {"models": {"small": {"requests_per_minute": 1}}},
            }
        }
    )
    limits = limiter(redis_client, Clock())
    small = limits_for(book, tenant_name, key_id(TENANT_KEY), "small")
    assert small is not None and limits_for(book, tenant_name, key_id(TENANT_KEY), "gpt-5.4") is None
    await limits.admit(small, ONE)
    with pytest.raises(RateLimited) as refused:
        await limits.admit(small, ONE)
    assert "for model small on the tenant" in refused.value.message


@pytest.mark.anyio
async def test_ratelimits_per_key_and_the_tenant_over_all_its_keys(
    redis_client: aioredis.Redis, tenant_name: str
) -> None:
    book = book_of(
        **{
            tenant_name: {
                "keys": [{"key": TENANT_KEY, "rate_limits": {"requests_per_minute": 2}}, OTHER_KEY],
                "rate_limits": {"requests_per_minute": 3},
            }
        }
    )
    limits = limiter(redis_client, Clock())
    limited = limits_for(book, tenant_name, key_id(TENANT_KEY), "small")
    other = limits_for(book, tenant_name, key_id(OTHER_KEY), "small")
    assert limited is not None and other is not None
    await limits.admit(limited, ONE)
    await limits.admit(limited, ONE)
    with pytest.raises(RateLimited) as by_key:
        await limits.admit(limited, ONE)
    assert f"on key {key_id(TENANT_KEY)}" in by_key.value.message
    hold = await limits.admit(other, ONE)  # the other key has only the tenant's limit: one left
    assert hold.headroom is not None and hold.headroom.requests is not None
    assert (hold.headroom.requests.limit, hold.headroom.requests.remaining) == (3, 0)
    with pytest.raises(RateLimited) as by_tenant:
        await limits.admit(other, ONE)
    assert "for the tenant" in by_tenant.value.message


@pytest.mark.anyio
async def test_ratelimits_headroom_shows_the_tightest_limit(
    redis_client: aioredis.Redis, tenant_name: str
) -> None:
    limits = limiter(redis_client, Clock())
    hold = await limits.admit(
        applying(
            tenant_name,
            ("tenant", LimitSet(requests=100, tokens=10_000)),
            ("key:k", LimitSet(requests=10, tokens=1_000_000)),
        ),
        Demand(tokens=500, nanos=0),
    )
    assert hold.headroom is not None
    assert hold.headroom.openai_headers() == {
        "x-ratelimit-limit-requests": "10",
        "x-ratelimit-remaining-requests": "9",
        "x-ratelimit-reset-requests": "6s",
        "x-ratelimit-limit-tokens": "10000",
        "x-ratelimit-remaining-tokens": "9500",
        "x-ratelimit-reset-tokens": "3s",
    }
    assert {counter.dimension for counter in hold.counters} == {"tokens"}  # what settles


@pytest.mark.anyio
async def test_ratelimits_500_concurrent_through_two_replicas_admit_exactly_the_limit(
    redis_url: str, redis_client: aioredis.Redis, tenant_name: str
) -> None:
    other = aioredis.Redis.from_url(redis_url)
    try:
        clock = Clock()  # the refill over the test's few milliseconds would blur an exact count
        replicas = [limiter(redis_client, clock), limiter(other, clock)]
        applicable = applying(tenant_name, ("tenant", LimitSet(requests=137)))

        async def attempt(number: int) -> bool:
            try:
                await replicas[number % 2].admit(applicable, ONE)
            except RateLimited:
                return False
            return True

        admitted = await asyncio.gather(*(attempt(number) for number in range(500)))
        assert sum(admitted) == 137
    finally:
        await other.aclose()


@pytest.mark.anyio
async def test_ratelimits_redis_down_fails_closed_or_open(
    dead_redis: aioredis.Redis, tenant_name: str
) -> None:
    limits = limiter(dead_redis)
    with pytest.raises(ServiceUnavailable) as closed:
        await limits.admit(applying(tenant_name, ("tenant", LimitSet(requests=1))), ONE)
    assert closed.value.code == "rate_limits_unavailable"
    hold = await limits.admit(applying(tenant_name, ("tenant", LimitSet(requests=1)), fails_open=True), ONE)
    assert not hold.enforced and hold.headroom is not None
    assert hold.headroom.openai_headers() == {} == hold.headroom.anthropic_headers()
    await limits.settle(hold, tokens=0, nanos=0)  # nothing held: nothing to give back, no error


@pytest.mark.anyio
async def test_ratelimits_settler_gives_back_what_the_answer_did_not_use(
    redis_client: aioredis.Redis, tenant_name: str
) -> None:
    clock = Clock()
    limits = limiter(redis_client, clock)
    settler = RateSettler(limits)
    applicable = applying(tenant_name, ("tenant", LimitSet(tokens=1000, nanos=1000)))

    async def answered(hold: RateHold, record: RequestRecord) -> None:
        record.put(RATE_HOLD, hold)
        settler(record)
        settler(record)  # told twice: settled once
        await settler.drain()

    record = RequestRecord(request_id="r1", endpoint="chat", tenant=Tenant(tenant_name, "k"))
    record.called_model, record.usage, record.cost_nanos = "m", Usage(input_tokens=50, output_tokens=50), 100
    await answered(await limits.admit(applicable, Demand(tokens=900, nanos=900)), record)

    failed = RequestRecord(request_id="r2", endpoint="chat", tenant=Tenant(tenant_name, "k"))
    await answered(await limits.admit(applicable, Demand(tokens=900, nanos=800)), failed)  # never sent

    hold = await limits.admit(applicable, Demand(tokens=900, nanos=900))
    assert hold.headroom is not None and hold.headroom.tokens is not None
    assert hold.headroom.tokens.remaining == 0  # 1000 - 100 used - 900 held now


@pytest.mark.parametrize(
    ("seconds", "written"),
    [
        (0, "0ms"),
        (0.25, "250ms"),
        (1, "1s"),
        (1.5, "1.5s"),
        (12.3456, "12.346s"),
        (60, "1m0s"),
        (61.25, "1m1.25s"),
    ],
)
def test_ratelimits_resets_are_written_as_openai_writes_durations(seconds: float, written: str) -> None:
    assert duration(seconds) == written


def test_ratelimits_anthropic_resets_are_rfc3339_times_rounded_up() -> None:
    assert moment(1_800_000_000.2) == "2027-01-15T08:00:01Z"


class CountingLimiter(RateLimiter):
    """A real limiter that also counts its settlement scripts."""

    calls = 0

    async def give_back(self, returns: Any) -> None:
        self.calls += 1
        await super().give_back(returns)


@pytest.mark.anyio
async def test_ratelimits_settlements_ending_together_go_in_one_script_per_tenant(
    redis_client: aioredis.Redis, tenant_name: str
) -> None:
    limits = CountingLimiter(redis_client, clock=Clock())
    settler = RateSettler(limits, linger=60)  # nothing leaves before the drain
    applicable = applying(tenant_name, ("tenant", LimitSet(requests=100, tokens=1000)))
    for number in range(4):
        record = RequestRecord(request_id=f"r{number}", endpoint="chat", tenant=Tenant(tenant_name, "k"))
        record.called_model, record.usage = "m", Usage(input_tokens=20, output_tokens=30)
        record.put(RATE_HOLD, await limits.admit(applicable, Demand(tokens=250, nanos=0)))
        settler(record)
    await settler.drain()
    assert limits.calls == 1
    hold = await limits.admit(applicable, Demand(tokens=0, nanos=0))
    assert hold.headroom is not None and hold.headroom.tokens is not None
    assert hold.headroom.tokens.remaining == 1000 - 4 * 50


def test_ratelimits_limits_for_takes_a_managed_keys_limits() -> None:
    """A managed key's limits (kept outside the config, so outside the book) count beside its tenant's;
    for a tenant without limits of its own, the caller says whether they fail open."""
    book = book_of(acme={"keys": [TENANT_KEY], "rate_limits": {"requests_per_minute": 10}})
    managed = Scoped(own=LimitSet(requests=2), models={"small": LimitSet(tokens=100)})
    both = limits_for(book, "acme", "key_0000abcd", "small", managed=managed)
    assert both is not None
    assert dict(both.sets) == {
        "tenant": LimitSet(requests=10),
        "key:key_0000abcd": LimitSet(requests=2),
        "key:key_0000abcd:model:small": LimitSet(tokens=100),
    }
    alone = limits_for(book, "globex", "key_0000abcd", "gpt-5.4", managed=managed, fails_open=True)
    assert alone is not None and dict(alone.sets) == {"key:key_0000abcd": LimitSet(requests=2)}
    assert alone.fails_open
    assert limits_for(book, "globex", "key_0000abcd", "gpt-5.4") is None
