"""What a request to create a managed key may say, checked against the config in force."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from gateway.base.errors import InvalidRequest
from gateway.config.schema.root import GatewayConfig
from gateway.keys.request import new_key_of, rotation_of
from tests.factories import make_config

NOW = 1_800_000_000.0
CONFIG = GatewayConfig.model_validate(make_config())


def asked(**body: Any) -> bytes:
    return orjson.dumps({"tenant": "acme", "name": "ci", **body})


def test_keys_request_takes_a_full_key() -> None:
    key = new_key_of(
        asked(
            expires_at="2027-03-31T00:00:00",
            models=["gpt-5.4"],
            budget={"daily_usd": "5"},
            tags={"team": "search"},
            rate_limits={"requests_per_minute": 60, "models": {"gpt-5.4": {"tokens_per_minute": 1000}}},
        ),
        CONFIG,
        now=NOW,
    )
    assert key.expiry() == 1_806_451_200.0  # no zone: UTC
    assert key.models == ("gpt-5.4",) and key.budget is not None and key.tags == {"team": "search"}
    assert key.rate_limits is not None and key.rate_limits.requests_per_minute == 60


@pytest.mark.parametrize(
    ("body", "code", "param"),
    [
        ({"tenant": "nobody"}, "unknown_tenant", "tenant"),
        ({"models": ["gpt-9"]}, "unknown_model", "models"),
        ({"expires_at": "2020-01-01T00:00:00Z"}, None, "expires_at"),
        ({"tags": {"bad key": "x"}}, None, "tags"),
        ({"budget": {"hard": True}}, None, "budget"),
        ({"secret": "mine"}, None, "secret"),
        ({"rate_limits": {"models": {"gpt-9": {"requests_per_minute": 1}}}}, "unknown_model", "rate_limits"),
        ({"rate_limits": {"requests_per_minute": 1, "on_redis_down": "open"}}, None, "rate_limits"),
        ({"rate_limits": {}}, None, "rate_limits"),
    ],
)
def test_keys_request_refusals(body: dict[str, Any], code: str | None, param: str) -> None:
    with pytest.raises(InvalidRequest) as refused:
        new_key_of(asked(**body), CONFIG, now=NOW)
    assert refused.value.param == param
    if code is not None:
        assert refused.value.code == code


def test_keys_request_not_json() -> None:
    with pytest.raises(InvalidRequest, match="not JSON"):
        new_key_of(b"{", CONFIG, now=NOW)


def test_keys_rotation_body_is_optional() -> None:
    assert rotation_of(b"").overlap_seconds is None
    assert rotation_of(b'{"overlap_seconds": 60}').overlap_seconds == 60
    with pytest.raises(InvalidRequest):
        rotation_of(b'{"overlap_seconds": -1}')
