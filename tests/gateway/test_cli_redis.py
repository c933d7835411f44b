"""``gateway costs`` and ``gateway probes`` say when the gateway's Redis is out of reach, and how to point
them at it, for a Redis that does not answer and for a URL that is not one (never a traceback)."""

from __future__ import annotations

import pytest

from gateway.cli import main
from tests.ports import free_port

COMMANDS = {
    "costs": ("costs", "summary"),
    "probes": ("probes", "report"),
}
WAYS = ("--redis-url", "GATEWAY_REDIS_URL", "$GATEWAY_DATA_DIR/redis/")


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_cli_redis_that_does_not_answer_is_explained(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"redis://127.0.0.1:{free_port()}/0"
    assert main([*COMMANDS[command], "--redis-url", url]) == 1
    err = capsys.readouterr().err
    assert f"gateway {command}: cannot reach the gateway's Redis: " in err
    assert all(way in err for way in WAYS), err


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("url", ["localhost:6379", "http://127.0.0.1:6379", "redis://127.0.0.1:port/0"])
def test_cli_redis_url_that_is_not_one_is_explained(
    command: str, url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*COMMANDS[command], "--redis-url", url]) == 1
    err = capsys.readouterr().err
    assert f"gateway {command}: --redis-url is not a Redis URL" in err
    assert "redis://127.0.0.1:6379/0" in err


def test_cli_redis_url_from_the_environment_is_named_as_such(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("GATEWAY_REDIS_URL", "localhost:6379")
    assert main(["probes", "report"]) == 1
    assert "gateway probes: GATEWAY_REDIS_URL is not a Redis URL" in capsys.readouterr().err
