"""The cost event, money formatting and the calendar arithmetic of the ledger."""

from __future__ import annotations

from dataclasses import FrozenInstanceError, fields
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import orjson
import pytest

from gateway.base.money import nanos_from_usd, usd
from gateway.ledger.event import CostEvent
from gateway.ledger.period import Period, day_of, iso_time, month_expiry, month_of, to_ms

NOV_30_NOON = 1_796_040_000_000  # 2026-11-30T12:00:00Z


def make_event(number: int = 0, **overrides: Any) -> CostEvent:
    """A priced event; ``number`` varies the id, the time (+1 s each) and the amounts."""
    values: dict[str, Any] = {
        "id": f"req-{number}",
        "time_ms": NOV_30_NOON + number * 1000,
        "tenant": "acme",
        "key_id": "k1",
        "requested_model": "gpt-5.4",
        "model": "gpt-5.4-mini" if number % 3 else "gpt-5.4",
        "provider": "openai",
        "action": "forward",
        "input_tokens": 1000 + number,
        "cached_tokens": number % 7,
        "output_tokens": 100 + number % 50,
        "reasoning_tokens": number % 5,
        "cost_nanos": 1_000_000 + number * 137,
        "counterfactual_nanos": 1_500_000 + number * 211,
    }
    values.update(overrides)
    return CostEvent(**values)


def test_cost_event_json_round_trip_keeps_every_field() -> None:
    event = make_event(
        7, tier=">272K", estimated=True, parent_id="req-6", status=499, latency_ms=12, stream=True
    )
    assert CostEvent.from_json(event.to_json()) == event


def test_cost_event_from_json_sets_every_field_and_stays_frozen() -> None:
    event = make_event(
        8, cost_parts=(1, 2, 3, 4), tags={"team": "search"}, conversation="c1", band="warning",
        prompt_tokens=1_000, retries=2, upstream_ms=40, first_token_ms=9, tool_uses="web_search=1",
    )  # fmt: skip
    parsed = CostEvent.from_json(event.to_json())
    names = [field.name for field in fields(CostEvent)]
    assert [getattr(parsed, name) for name in names] == [getattr(event, name) for name in names]
    assert type(parsed.cost_parts) is tuple
    with pytest.raises(FrozenInstanceError):
        parsed.cost_nanos = 1  # type: ignore[misc]


@pytest.mark.parametrize(
    ("change", "error"),
    [({"cost_nanos": 0.5}, TypeError), ({"id": ""}, ValueError), ({"cost_parts": [1, 2]}, ValueError),
     ({"tags": {"team": 1}}, ValueError)],
)  # fmt: skip
def test_cost_event_from_json_checks_what_init_checks(
    change: dict[str, object], error: type[Exception]
) -> None:
    data = orjson.loads(make_event(1).to_json()) | change
    with pytest.raises(error):
        CostEvent.from_json(orjson.dumps(data))


def test_cost_event_from_json_ignores_unknown_fields() -> None:
    data = orjson.loads(make_event(1).to_json())
    data["added_in_a_later_version"] = 1
    assert CostEvent.from_json(orjson.dumps(data)) == make_event(1)


def test_cost_event_from_json_names_a_missing_required_field() -> None:
    data = orjson.loads(make_event(1).to_json())
    del data["tenant"], data["model"]
    with pytest.raises(TypeError, match="needs tenant, model"):
        CostEvent.from_json(orjson.dumps(data))


def test_cost_event_from_json_fills_the_defaults_of_fields_an_older_event_lacks() -> None:
    data = orjson.loads(make_event(1, stream=True, cost_parts=(1, 2, 3, 4)).to_json())
    for name in ("stream", "cost_parts", "tier", "latency_ms"):
        del data[name]
    assert CostEvent.from_json(orjson.dumps(data)) == make_event(1)


@pytest.mark.parametrize("field", ["cost_nanos", "counterfactual_nanos"])
def test_cost_event_refuses_float_money(field: str) -> None:
    with pytest.raises(TypeError):
        make_event(**{field: 0.5})  # type: ignore[arg-type]


def test_cost_event_saving_is_counterfactual_minus_cost() -> None:
    assert make_event(cost_nanos=300, counterfactual_nanos=1000).saving_nanos == 700
    assert make_event(cost_nanos=300, counterfactual_nanos=0).saving_nanos == -300


@pytest.mark.parametrize(
    ("nanos", "text", "trimmed"),
    [
        (0, "0.000000000", "0.00"),
        (1, "0.000000001", "0.000000001"),
        (1_234_500, "0.001234500", "0.0012345"),
        (100 * 10**9, "100.000000000", "100.00"),
        (-2_500_000_000, "-2.500000000", "-2.50"),
        (123_456_789_012_345_678, "123456789.012345678", "123456789.012345678"),
    ],
)
def test_money_usd_is_exact_decimal_text(nanos: int, text: str, trimmed: str) -> None:
    assert usd(nanos) == text
    assert usd(nanos, trim=True) == trimmed
    assert Decimal(usd(nanos)) * 10**9 == nanos


@pytest.mark.parametrize(
    ("amount", "nanos"), [("1", 10**9), ("0.000000001", 1), (Decimal("2.5"), 2_500_000_000), (3, 3 * 10**9)]
)
def test_money_nanos_from_usd(amount: Decimal | str | int, nanos: int) -> None:
    assert nanos_from_usd(amount) == nanos


def test_money_nanos_from_usd_refuses_sub_nano_amounts() -> None:
    with pytest.raises(ValueError, match="nano-dollars"):
        nanos_from_usd("0.0000000001")


@pytest.mark.parametrize(
    ("time_ms", "day"),
    [
        (NOV_30_NOON, "2026-11-30"),
        (1_796_083_199_999, "2026-11-30"),
        (1_796_083_200_000, "2026-12-01"),
        (0, "1970-01-01"),
    ],
)
def test_period_day_and_month_are_utc(time_ms: int, day: str) -> None:
    assert day_of(time_ms) == day
    assert month_of(time_ms) == day[:7]


def test_period_iso_time_has_milliseconds() -> None:
    assert iso_time(NOV_30_NOON + 7) == "2026-11-30T12:00:00.007Z"


@pytest.mark.parametrize(
    "time_ms",
    [0, 1, 999, 59_999, 3_599_999, 86_399_999, 86_400_000, -1, -86_400_001, NOV_30_NOON + 43_199_999,
     951_782_400_000, 253_402_300_799_999],
)  # fmt: skip
def test_period_iso_time_is_what_datetime_writes(time_ms: int) -> None:
    moment = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=time_ms)
    assert iso_time(time_ms) == moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


@pytest.mark.parametrize(
    ("month", "retention", "expires"),
    [("2026-11", 13, "2028-01-01"), ("2026-12", 1, "2027-02-01"), ("2026-01", 11, "2027-01-01")],
)
def test_period_month_expiry_is_end_of_month_plus_retention(month: str, retention: int, expires: str) -> None:
    assert day_of(month_expiry(month, retention_months=retention) * 1000) == expires


@pytest.mark.parametrize(
    ("start", "end", "first", "last_included"),
    [
        ("2026-11-01", "2026-11-30", "2026-11-01T00:00:00.000Z", "2026-11-30T23:59:59.999Z"),
        (
            "2026-11-30T10:00:00Z",
            "2026-11-30T11:00:00Z",
            "2026-11-30T10:00:00.000Z",
            "2026-11-30T10:59:59.999Z",
        ),
        (
            "2026-11-30T10:00:00+01:00",
            "2026-11-30T10:00:00",
            "2026-11-30T09:00:00.000Z",
            "2026-11-30T09:59:59.999Z",
        ),
    ],
)
def test_period_parse_dates_include_the_last_day(
    start: str, end: str, first: str, last_included: str
) -> None:
    period = Period.parse(start, end, now_ms=NOV_30_NOON)
    assert iso_time(period.start_ms) == first
    assert iso_time(period.end_ms - 1) == last_included


def test_period_parse_defaults_to_this_month_until_now() -> None:
    period = Period.parse(None, None, now_ms=NOV_30_NOON)
    assert iso_time(period.start_ms) == "2026-11-01T00:00:00.000Z"
    assert period.end_ms == NOV_30_NOON + 1


@pytest.mark.parametrize(("start", "end"), [("2026-11-30", "2026-11-29"), ("yesterday", None)])
def test_period_parse_refuses_bad_bounds(start: str, end: str | None) -> None:
    with pytest.raises(ValueError):
        Period.parse(start, end, now_ms=NOV_30_NOON)


def test_period_lists_months_and_days_it_touches() -> None:
    period = Period(to_ms_text("2026-10-31T23:00:00"), to_ms_text("2027-01-01T00:00:00"))
    assert period.months() == ["2026-10", "2026-11", "2026-12"]
    days = period.days()
    assert (days[0], days[-1], len(days)) == ("2026-10-31", "2026-12-31", 62)


def to_ms_text(text: str) -> int:
    return to_ms(datetime.fromisoformat(text))
