"""Step 8, metering: the most a request may cost (the budget hold), and the cost events a finished request
becomes (its own, with the counterfactual; one per side call, with the request as parent).

Prices (USD per million tokens) from ``make_config``: gpt-5.4 2.50 in, 0.25 cached, 15.00 out, and above
272,000 input tokens the whole request at 2x in, 2x cached, 1.5x out; ``small`` (priced here) 0.25 in,
2.00 out, at most 2,000 output tokens. Expected amounts are worked out by hand in nano-dollars.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis.asyncio as aioredis
import respx
from structlog.testing import capture_logs

from gateway.base.counterfactual_cache import Basis, CounterfactualCache
from gateway.base.money import usd
from gateway.base.record import RequestRecord, SideCall
from gateway.base.types import Tenant, Usage
from gateway.config.schema.ledger import LedgerConfig
from gateway.config.schema.root import GatewayConfig
from gateway.config.schema.sampling import PROBE_TENANT
from gateway.core.metering import DEFAULT_MAX_OUTPUT_TOKENS, LedgerRecorder, Money, cost_of, max_cost_nanos
from gateway.ledger import CostEvent, Ledger, LedgerReader, Period
from gateway.money.pricing import price
from tests.factories import UPSTREAM, chat_body, completion, make_config, shared_counter
from tests.gateway.test_metrics import metered_client


def gateway_config() -> GatewayConfig:
    config = make_config()
    config["models"]["small"]["pricing"] = {"input": "0.25", "output": "2.00"}
    config["models"]["small"]["max_output_tokens"] = 2000
    return GatewayConfig.model_validate(config)


CONFIG = gateway_config()


def recorder(ledger: Ledger | None = None) -> LedgerRecorder:
    """Without a ledger: one never started, for the methods that only build events."""
    unused = Ledger(aioredis.Redis(), spool_dir=Path("/nonexistent/spool"))
    return LedgerRecorder(ledger or unused, config=lambda: CONFIG, counter=shared_counter)


def request(**fields: Any) -> RequestRecord:
    record = RequestRecord(request_id="req_1", endpoint="chat", tenant=Tenant("acme", "k1"))
    record.requested_model = "gpt-5.4"
    record.called_model = "gpt-5.4"
    record.provider = "mock"
    record.status = 200
    for name, value in fields.items():
        setattr(record, name, value)
    return record


def main_event(**fields: Any) -> CostEvent:
    return recorder().main_event(request(**fields), CONFIG, "acme")


# --- max_cost_nanos --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "input_tokens", "body", "expected"),
    [
        ("gpt-5.4", 1000, {"max_completion_tokens": 100}, 2_500_000 + 1_500_000),
        ("gpt-5.4", 1000, {"max_tokens": 100}, 2_500_000 + 1_500_000),
        ("gpt-5.4", 1000, {"max_completion_tokens": 100, "max_tokens": 50}, 2_500_000 + 1_500_000),
        ("gpt-5.4", 1000, {}, 2_500_000 + DEFAULT_MAX_OUTPUT_TOKENS * 15_000),
        ("gpt-5.4", 1000, {"max_completion_tokens": 0}, 2_500_000 + DEFAULT_MAX_OUTPUT_TOKENS * 15_000),
        ("gpt-5.4", 1000, {"max_completion_tokens": "100"}, 2_500_000 + DEFAULT_MAX_OUTPUT_TOKENS * 15_000),
        ("gpt-5.4", 272_000, {"max_completion_tokens": 1000}, 680_000_000 + 15_000_000),
        ("gpt-5.4", 300_000, {"max_completion_tokens": 1000}, 1_500_000_000 + 22_500_000),
        ("small", 1000, {}, 250_000 + 2000 * 2000),
        ("small", 1000, {"max_tokens": 10}, 250_000 + 10 * 2000),
    ],
)
def test_max_cost_nanos_prices_input_and_output_cap_at_the_tier_the_input_hits(
    model: str, input_tokens: int, body: dict[str, Any], expected: int
) -> None:
    assert max_cost_nanos(CONFIG.models[model], input_tokens, body) == expected


@pytest.mark.parametrize("model", [None, "gpt-5.2"])
def test_max_cost_nanos_is_zero_for_a_model_without_prices(model: str | None) -> None:
    config = CONFIG.models[model] if model else None
    assert max_cost_nanos(config, 100_000, {"max_completion_tokens": 1000}) == 0


# --- the request's own event ---------------------------------------------------------------------


def test_recorder_forwarded_request_costs_its_usage_and_saves_nothing() -> None:
    event = main_event(
        prompt_tokens=1000, forwarded_tokens=1000, usage=Usage(input_tokens=1000, output_tokens=100)
    )
    assert (event.id, event.tenant, event.key_id, event.parent_id) == ("req_1", "acme", "k1", None)
    assert (event.requested_model, event.model, event.provider, event.action) == (
        "gpt-5.4",
        "gpt-5.4",
        "mock",
        "forward",
    )
    assert event.cost_nanos == event.counterfactual_nanos == 2_500_000 + 1_500_000
    assert event.saving_nanos == 0 and event.tier is None and not event.estimated


def rewritten(cached: int, basis: Basis, **fields: Any) -> dict[str, Any]:
    """A request the gateway rewrote, whose unchanged form would have had ``cached`` tokens cached."""
    return {"transformed": True, "counterfactual": CounterfactualCache(cached, basis), **fields}


@pytest.mark.parametrize(
    ("fields", "cost", "counterfactual", "basis"),
    [
        pytest.param(
            rewritten(
                0,
                Basis.CONVERSATION_COLD,
                action="compress",
                prompt_tokens=260_000,
                usage=Usage(150_000, 0, 500),
            ),
            375_000_000 + 7_500_000,
            650_000_000 + 7_500_000,
            "conversation_cold",
            id="compressed-after-the-cache-went-cold",
        ),
        pytest.param(
            rewritten(0, Basis.NONE, action="retrieve", prompt_tokens=300_000, usage=Usage(120_000, 0, 500)),
            300_000_000 + 7_500_000,
            1_500_000_000 + 11_250_000,
            "none",
            id="retrieved-unchanged-would-hit-the-tier",
        ),
        pytest.param(
            rewritten(
                250_000,
                Basis.CONVERSATION,
                action="compress",
                prompt_tokens=260_000,
                usage=Usage(150_000, 100_000, 500),
            ),
            125_000_000 + 25_000_000 + 7_500_000,
            25_000_000 + 62_500_000 + 7_500_000,
            "conversation",
            id="compressed-while-warm-costs-more-than-forwarding",
        ),
        pytest.param(
            {
                "action": "reroute",
                "called_model": "small",
                "prompt_tokens": 1000,
                "usage": Usage(1000, 600, 100),
            },
            250_000 + 200_000,  # small has no cached price: cached tokens bill as input
            1_000_000 + 150_000 + 1_500_000,
            "as_sent",
            id="rerouted-counterfactual-at-the-requested-model-with-its-cache",
        ),
    ],
)
def test_recorder_counterfactual_prices_the_unchanged_request(
    fields: dict[str, Any], cost: int, counterfactual: int, basis: str
) -> None:
    event = main_event(**fields)
    assert event.cost_nanos == cost
    assert event.counterfactual_nanos == counterfactual
    assert event.saving_nanos == counterfactual - cost
    assert event.counterfactual_basis == basis
    assert event.tier is None  # what was sent stayed below the line


def test_recorder_forwarded_request_whose_provider_reports_a_cache_saves_nothing() -> None:
    event = main_event(prompt_tokens=200_000, usage=Usage(200_000, 190_000, 800))
    assert event.cost_nanos == event.counterfactual_nanos and event.saving_nanos == 0
    assert (event.counterfactual_basis, event.counterfactual_cached_tokens) == ("forwarded", 190_000)


@pytest.mark.parametrize(
    ("guess", "cached", "basis", "counterfactual_cached"),
    [
        pytest.param(
            CounterfactualCache(180_000, Basis.CONVERSATION), 4_000, "conversation_lost", 180_000, id="lost"
        ),
        pytest.param(
            CounterfactualCache(180_000, Basis.CONVERSATION), 190_000, "forwarded", 190_000, id="no-loss"
        ),
        pytest.param(
            CounterfactualCache(0, Basis.CONVERSATION_COLD), 4_000, "forwarded", 4_000, id="cold-anyway"
        ),
    ],
)
def test_recorder_forwarded_after_a_rewrite_records_the_cache_the_rewrite_cost(
    guess: CounterfactualCache, cached: int, basis: str, counterfactual_cached: int
) -> None:
    """Unchanged, after the gateway rewrote the conversation's previous request: priced against the
    client's own previous request when that would have left more cached (a negative saving, the loss)."""
    event = main_event(prompt_tokens=200_000, counterfactual=guess, usage=Usage(200_000, cached, 800))
    assert (event.counterfactual_basis, event.counterfactual_cached_tokens) == (basis, counterfactual_cached)
    expected = (200_000 - counterfactual_cached) * 2_500 + counterfactual_cached * 250 + 800 * 15_000
    assert event.counterfactual_nanos == expected
    assert event.saving_nanos == expected - event.cost_nanos
    assert (event.saving_nanos < 0) is (basis == "conversation_lost")


def test_recorder_unknown_conversation_is_priced_from_the_tenant_share_and_marked() -> None:
    event = main_event(
        **rewritten(
            180_000, Basis.TENANT_SHARE, action="compress", prompt_tokens=200_000, usage=Usage(20_000, 0, 100)
        )
    )
    assert event.counterfactual_cached_tokens == 180_000 and event.counterfactual_basis == "tenant_share"
    assert event.counterfactual_nanos == 20_000 * 2_500 + 180_000 * 250 + 100 * 15_000
    assert event.estimated  # the usage is the provider's, but the saving rests on an estimate


def test_recorder_request_sent_above_the_line_is_billed_at_the_tier() -> None:
    event = main_event(prompt_tokens=300_000, usage=Usage(input_tokens=300_000, output_tokens=500))
    assert event.tier == "tier0"
    assert event.cost_nanos == event.counterfactual_nanos == 1_500_000_000 + 11_250_000


def test_recorder_model_without_prices_costs_nothing() -> None:
    event = main_event(called_model="gpt-5.2", usage=Usage(input_tokens=1000, output_tokens=100))
    assert (event.model, event.cost_nanos, event.counterfactual_nanos, event.tier) == ("gpt-5.2", 0, 0, None)


def test_recorder_estimates_from_output_text_when_usage_is_missing() -> None:
    event = main_event(
        stream=True, prompt_tokens=1300, forwarded_tokens=1234, usage=None, output_text="hello world"
    )
    assert event.estimated and event.stream
    assert (event.input_tokens, event.output_tokens) == (1234, 2)  # o200k: "hello world" is 2 tokens
    assert event.cost_nanos == 1234 * 2_500 + 2 * 15_000


@pytest.mark.parametrize(
    ("prompt", "forwarded", "text", "expected"),
    [
        (1300, None, "", (1300, 0)),
        (None, None, "hello world", (0, 2)),
        (None, 40, "hello world hello world", (40, 4)),
    ],
)
def test_recorder_estimate_falls_back_to_received_tokens(
    prompt: int | None, forwarded: int | None, text: str, expected: tuple[int, int]
) -> None:
    usage = recorder().estimate(
        request(prompt_tokens=prompt, forwarded_tokens=forwarded, usage=None, output_text=text)
    )
    assert (usage.input_tokens, usage.output_tokens, usage.estimated) == (*expected, True)


# --- side calls, through a real ledger -----------------------------------------------------------


@pytest.fixture
async def ledger(tmp_path: Path, redis_client: aioredis.Redis) -> AsyncIterator[Ledger]:
    async with Ledger(
        redis_client, spool_dir=tmp_path / "spool", config=LedgerConfig(linger_seconds=0)
    ) as opened:
        yield opened


async def recorded(ledger: Ledger, redis: aioredis.Redis, tenant: str) -> dict[str, CostEvent]:
    await ledger.drain()
    now = int(time.time() * 1000)
    period = Period(now - 3_600_000, now + 3_600_000)
    return {event.id: event async for event in LedgerReader(redis).events(tenant, period)}


def side(kind: str, model: str, usage: Usage | None, status: int = 200) -> SideCall:
    return SideCall(kind=kind, model=model, provider="mock", usage=usage, seconds=0.25, status=status)


@pytest.mark.anyio
async def test_recorder_side_calls_become_events_numbered_per_kind_under_the_request(
    ledger: Ledger, redis_client: aioredis.Redis, tenant_name: str
) -> None:
    record = request(
        request_id="req_side",
        tenant=Tenant(tenant_name, "k1"),
        action="compress",
        prompt_tokens=260_000,
        usage=Usage(150_000, 0, 500),
        side_calls=[
            side("summary", "small", Usage(10_000, 0, 500)),
            side("embeddings", "text-embedding-3-small", Usage(2_000)),
            side("summary", "small", None, status=502),
        ],
    )
    recorder(ledger)(record)
    events = await recorded(ledger, redis_client, tenant_name)
    assert sorted(events) == ["req_side", "req_side:embeddings:1", "req_side:summary:1", "req_side:summary:2"]
    first, failed, embedded = (
        events["req_side:summary:1"],
        events["req_side:summary:2"],
        events["req_side:embeddings:1"],
    )
    assert {e.parent_id for e in (first, failed, embedded)} == {"req_side"}
    assert {e.counterfactual_nanos for e in (first, failed, embedded)} == {0}
    assert (first.action, first.model, first.cost_nanos, first.estimated) == (
        "summary",
        "small",
        2_500_000 + 1_000_000,
        False,
    )
    assert (failed.status, failed.cost_nanos, failed.estimated) == (502, 0, True)
    assert (embedded.action, embedded.cost_nanos, embedded.latency_ms) == ("embeddings", 0, 250)
    request_total = sum(e.saving_nanos for e in events.values())
    assert request_total == events["req_side"].counterfactual_nanos - sum(
        e.cost_nanos for e in events.values()
    )
    assert record.cost_nanos == sum(e.cost_nanos for e in events.values())  # for the request's log line


@pytest.mark.anyio
async def test_recorder_request_that_never_reached_a_model_keeps_only_its_side_events(
    ledger: Ledger, redis_client: aioredis.Redis, tenant_name: str
) -> None:
    record = request(
        request_id="req_failed",
        tenant=Tenant(tenant_name, "k1"),
        called_model=None,
        status=502,
        side_calls=[side("summary", "small", Usage(10_000, 0, 500))],
    )
    recorder(ledger)(record)
    assert list(await recorded(ledger, redis_client, tenant_name)) == ["req_failed:summary:1"]


@pytest.mark.anyio
async def test_recorder_bills_a_trusted_probe_to_the_probe_tenant(
    ledger: Ledger, redis_client: aioredis.Redis, tenant_name: str
) -> None:
    record = request(request_id=f"req_{tenant_name}", tenant=Tenant(tenant_name, "k1"), usage=Usage(10, 0, 1))
    record.bill_tenant = PROBE_TENANT
    recorder(ledger)(record)
    assert await recorded(ledger, redis_client, tenant_name) == {}
    probe_events = await recorded(ledger, redis_client, PROBE_TENANT)
    assert probe_events[f"req_{tenant_name}"].key_id == "k1"


@pytest.mark.anyio
async def test_recorder_ignores_a_request_without_a_tenant(ledger: Ledger) -> None:
    record = request(tenant=None, usage=Usage(10, 0, 1))
    recorder(ledger)(record)
    assert ledger.stats().recorded == 0
    assert record.cost_nanos is None


def test_request_log_line_carries_the_ledger_cost_in_usd(tmp_path: Path, redis_url: str) -> None:
    router = respx.Router(assert_all_called=False)
    usage = {"prompt_tokens": 1000, "completion_tokens": 100, "total_tokens": 1100}
    router.post(f"{UPSTREAM}/chat/completions").mock(
        return_value=httpx.Response(200, json=completion(usage=usage))
    )
    with metered_client(tmp_path, redis_url, router) as client:
        with capture_logs() as logs:
            response = client.post("/v1/chat/completions", json=chat_body())
            assert response.status_code == 200, response.text
            client.get("/metrics")  # a later request: the first one's observers have run by its answer
    [line] = [entry for entry in logs if entry["event"] == "request"]
    assert line["cost_usd"] == "0.004000000"  # 1,000 in at $2.50/M + 100 out at $15.00/M


def test_recorder_claims_no_saving_for_a_prompt_larger_than_the_window_of_the_model_asked_for() -> None:
    """Forwarding it unchanged was impossible (the provider refuses it, unbilled): nothing was saved."""
    window = make_config()["models"]["gpt-5.4"]["context_window"]
    usage = Usage(120_000, 0, 500)
    over = main_event(
        **rewritten(window, Basis.TENANT_SHARE, action="retrieve", prompt_tokens=window + 1, usage=usage)
    )
    at = main_event(**rewritten(0, Basis.NONE, action="retrieve", prompt_tokens=window, usage=usage))
    assert (over.counterfactual_basis, over.saving_nanos) == ("over_window", 0)
    assert over.counterfactual_nanos == over.cost_nanos == 120_000 * 2_500 + 500 * 15_000
    assert over.counterfactual_cached_tokens == 0
    assert at.counterfactual_basis == "none" and at.saving_nanos > 0  # at the window it could have gone


def test_an_estimated_count_is_priced_as_the_provider_would_have_counted_the_unchanged_request() -> None:
    """Claude's counts are estimates: the unchanged request is priced on the provider's count, here
    scaled by how far the estimate of what was sent fell short of the provider's count of it. A 260K
    estimate the provider counts 13% higher lands over the 272K tier; priced on the estimate it would not."""
    fields = rewritten(
        0,
        Basis.CONVERSATION_COLD,
        action="compress",
        prompt_tokens=260_000,
        forwarded_tokens=100_000,
        usage=Usage(113_000, 0, 500),
        counts_estimated=True,
    )
    event = main_event(**fields)
    unchanged = Usage(293_800, 0, 500)  # 260,000 x 113,000 / 100,000
    assert event.counterfactual_nanos == price(unchanged, CONFIG.models["gpt-5.4"].pricing).total_nanos
    assert event.estimated  # scaled: an estimate, and said so
    on_the_estimate = price(Usage(260_000, 0, 500), CONFIG.models["gpt-5.4"].pricing).total_nanos
    assert event.counterfactual_nanos > 2 * on_the_estimate  # over the tier: twice the input price

    confirmed = main_event(**{**fields, "confirmed_tokens": 271_000})  # the provider's own count
    priced = price(Usage(271_000, 0, 500), CONFIG.models["gpt-5.4"].pricing).total_nanos
    assert confirmed.counterfactual_nanos == priced and not confirmed.estimated

    exact = main_event(**{**fields, "counts_estimated": False})  # an exact count is the gateway's own
    assert exact.counterfactual_nanos == on_the_estimate and not exact.estimated


def test_an_estimated_count_scales_the_cached_and_written_tokens_to_the_providers_count() -> None:
    """The conversation's fingerprints count tokens the gateway's way: with Claude's estimate 200K and the
    provider's count 230K, the 170K the unchanged request would have read from the cache are 195.5K of
    the provider's, and the 30K it would have written (explicit breakpoints) are 34.5K, billed as writes."""
    guess = CounterfactualCache(170_000, Basis.CONVERSATION, writes=30_000)
    event = main_event(
        transformed=True,
        counterfactual=guess,
        action="compress",
        prompt_tokens=200_000,
        confirmed_tokens=230_000,
        forwarded_tokens=50_000,
        usage=Usage(57_500, 40_000, 500),
        counts_estimated=True,
    )
    assert event.counterfactual_cached_tokens == 195_500
    unchanged = Usage(230_000, 195_500, 500, cache_write_tokens=34_500)
    assert event.counterfactual_nanos == recorder_cost(unchanged)


def recorder_cost(usage: Usage) -> int:
    cost = cost_of(usage, CONFIG, "gpt-5.4")
    assert cost is not None
    return cost.total_nanos


def test_recorder_event_keeps_the_band_and_conversation_of_its_request_and_side_calls_neither() -> None:
    record = request(
        usage=Usage(input_tokens=1000, output_tokens=10), band="warning", conversation="p0123abcd"
    )
    record.side_calls.append(SideCall("summary", "small", "mock", Usage(input_tokens=10), 0.1, 200))
    (main, _), (side, _) = recorder().events(record)
    assert (main.band, main.conversation) == ("warning", "p0123abcd")
    assert (side.band, side.conversation) == (None, None)
    assert CostEvent.from_json(main.to_json()) == main


def test_the_event_reads_the_price_its_headers_were_given_and_prices_anew_what_changed() -> None:
    priced = recorder()
    calls: list[Usage] = []
    real = priced.money

    def counted(record: RequestRecord, config: GatewayConfig, usage: Usage) -> Money:
        calls.append(usage)
        return real(record, config, usage)

    priced.money = counted  # type: ignore[method-assign]
    record = request(usage=Usage(input_tokens=1_000, output_tokens=10))
    headers = priced.cost_headers(record)
    event = priced.main_event(record, CONFIG, "acme")
    assert len(calls) == 1  # priced once for both
    assert headers["x-gateway-cost-usd"] == usd(event.cost_nanos, trim=True)
    record.usage = Usage(input_tokens=2_000, output_tokens=10)  # a stream's usage, known later
    later = priced.main_event(record, CONFIG, "acme")
    assert len(calls) == 2 and later.cost_nanos > event.cost_nanos
    record.counterfactual = CounterfactualCache(500, Basis.CONVERSATION)
    assert priced.main_event(record, CONFIG, "acme").counterfactual_basis == "conversation_lost"
    assert len(calls) == 3
