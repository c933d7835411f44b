"""The budget and ledger sections of the config."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from gateway.config.schema.ledger import BudgetConfig, LedgerConfig
from gateway.config.schema.root import TenantConfig


def test_budget_config_from_tenant_yaml_shape() -> None:
    tenant = TenantConfig.model_validate(
        {"keys": ["sha256:" + "0" * 64], "budget": {"monthly_usd": "100", "daily_usd": 5, "soft_ratio": 0.8}}
    )
    assert tenant.budget is not None
    assert tenant.budget.limit_nanos("monthly") == 100 * 10**9
    assert tenant.budget.limit_nanos("daily") == 5 * 10**9
    assert tenant.budget.soft_nanos("monthly") == 80 * 10**9
    assert tenant.budget.soft_nanos("daily") == 4 * 10**9
    assert tenant.budget.on_redis_down == "closed"


@pytest.mark.parametrize(
    ("budget", "period", "soft"),
    [
        ({"monthly_usd": 100, "daily_usd": 10, "soft_usd": 90}, "monthly", 90 * 10**9),
        ({"monthly_usd": 100, "daily_usd": 10, "soft_usd": 90}, "daily", None),
        ({"daily_usd": 10, "soft_usd": "7.5"}, "daily", 7_500_000_000),
        ({"monthly_usd": 100}, "monthly", None),
        ({"monthly_usd": "0.000000003", "soft_ratio": 0.5}, "monthly", 1),
    ],
)
def test_budget_config_soft_line(budget: dict[str, Any], period: str, soft: int | None) -> None:
    assert BudgetConfig.model_validate(budget).soft_nanos(period) == soft  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "budget",
    [
        {},
        {"soft_ratio": 0.5},
        {"monthly_usd": 0},
        {"monthly_usd": 10, "soft_ratio": 0.5, "soft_usd": 5},
        {"monthly_usd": 10, "soft_usd": 10},
        {"monthly_usd": 10, "soft_ratio": 1.5},
        {"monthly_usd": "0.0000000001"},
        {"monthly_usd": 10, "on_redis_down": "maybe"},
        {"monthly_usd": 10, "weekly_usd": 1},
    ],
)
def test_budget_config_rejects_inconsistent_budgets(budget: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        BudgetConfig.model_validate(budget)


@pytest.mark.parametrize(
    ("budget", "fails_open"),
    [
        ({"monthly_usd": 1}, False),
        ({"monthly_usd": 1, "on_redis_down": "open"}, True),
        ({"monthly_usd": 1, "hard": False}, True),
    ],
)
def test_budget_config_fails_closed_by_default_when_hard(budget: dict[str, Any], fails_open: bool) -> None:
    assert BudgetConfig.model_validate(budget).fails_open() is fails_open


def test_ledger_config_defaults_and_limits() -> None:
    config = LedgerConfig()
    assert (config.retention_months, config.batch_size, config.key_prefix) == (13, 500, "gw")
    with pytest.raises(ValidationError):
        LedgerConfig(key_prefix="gw{x}")
