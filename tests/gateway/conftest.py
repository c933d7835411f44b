"""Fixtures of the in-process gateway tests."""

from __future__ import annotations

import pytest

from gateway.experiments import tally


@pytest.fixture
def experiments_flush_often(monkeypatch: pytest.MonkeyPatch) -> None:
    """Experiments' counters and pairs written to Redis every 50 ms instead of every 2 s, for the tests
    that wait for them (each wait is for what was written, never for a time)."""
    monkeypatch.setattr(tally, "FLUSH_SECONDS", 0.05)
