"""The rule /readyz follows for failures that may pass (one slow moment), and the tri-state
GATEWAY_REDIS_CLUSTER it reads the Redis mode from."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from gateway.config.settings import Settings
from gateway.edge.readiness import Lasting


def test_readiness_failure_counts_once_it_has_lasted_the_grace() -> None:
    lasting = Lasting(3.0)
    assert lasting.report("write probe failed", 100.0) == (
        False,
        "write probe failed (for 0.0 s; not ready after 3 s)",
    )
    assert lasting.report("write probe failed", 102.5)[0] is False
    assert lasting.report("write probe failed", 103.0) == (True, "write probe failed")


def test_readiness_one_success_clears_a_failure() -> None:
    lasting = Lasting(3.0)
    lasting.report("down", 0.0)
    assert lasting.report(None, 2.0) == (False, "ok")
    assert lasting.report("down", 4.0)[0] is False  # the clock starts again at the next failure
    assert lasting.report("down", 7.0)[0] is True


@pytest.mark.parametrize(
    ("value", "expected"),
    [("auto", None), ("", None), ("AUTO", None), ("true", True), ("false", False), ("1", True), ("0", False)],
)
def test_settings_redis_cluster_is_true_false_or_auto(
    monkeypatch: pytest.MonkeyPatch, value: str, expected: bool | None
) -> None:
    monkeypatch.setenv("GATEWAY_REDIS_URL", "redis://node-1:6379/0")
    monkeypatch.setenv("GATEWAY_REDIS_CLUSTER", value)
    assert Settings().redis_cluster is expected


def test_settings_redis_cluster_defaults_to_auto() -> None:
    assert Settings().redis_cluster is None


def test_settings_forced_cluster_needs_a_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GATEWAY_REDIS_CLUSTER", "true")
    with pytest.raises(ValidationError, match="GATEWAY_REDIS_CLUSTER needs GATEWAY_REDIS_URL"):
        Settings()
