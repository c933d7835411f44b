"""``gateway serve``'s Redis before any worker starts: the embedded server started and named, or the
configured one's version checked (a server that cannot be asked yet is let through, with a warning)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gateway.commands.serve import redis_for_workers
from gateway.config.settings import Settings


def test_a_configured_redis_that_meets_the_minimum_starts_nothing(
    redis_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert redis_for_workers(Settings(redis_url=redis_url)) is None
    assert "warning" not in capsys.readouterr().out


def test_a_configured_redis_that_cannot_be_asked_is_let_through_with_a_warning(
    dead_redis_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert redis_for_workers(Settings(redis_url=dead_redis_url)) is None
    out = capsys.readouterr().out
    assert "gateway: warning: could not ask Redis for its version; it was not checked" in out


def test_without_a_url_the_embedded_server_starts_and_says_what_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("GATEWAY_REDIS_URL", "restored-to-unset-after-the-test")
    monkeypatch.delenv("GATEWAY_REDIS_URL")
    embedded = redis_for_workers(Settings(data_dir=tmp_path))
    assert embedded is not None
    try:
        assert os.environ["GATEWAY_REDIS_URL"] == embedded.url  # what the workers will read
        assert embedded.version is not None
        said = f"gateway: embedded Valkey {embedded.version.release} at {embedded.url}"
        assert said in capsys.readouterr().out
    finally:
        embedded.stop()
