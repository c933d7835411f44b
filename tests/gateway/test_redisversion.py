"""The oldest Redis the gateway runs on: read from INFO, compared, and refused with the reason."""

from __future__ import annotations

import pytest
import redis

from gateway.redis.version import (
    MINIMUM,
    RedisVersionError,
    check_configured,
    parse_version,
    refusal,
    require,
    server_version,
)


def parse_info(text: str) -> dict[str, str]:
    """An ``INFO server`` reply as redis-py hands it over: its ``name:value`` fields."""
    return dict(line.split(":", 1) for line in text.splitlines() if ":" in line and not line.startswith("#"))


REDIS_6 = "# Server\r\nredis_version:6.2.14\r\nredis_git_sha1:00000000\r\nredis_mode:standalone\r\n"
REDIS_7 = "# Server\r\nredis_version:7.0.15\r\nredis_mode:standalone\r\n"
VALKEY_9 = "# Server\r\nredis_version:7.2.4\r\nserver_name:valkey\r\nvalkey_version:9.1.2\r\n"


@pytest.mark.parametrize(
    ("text", "numbers"),
    [("7.0.15", (7, 0, 15)), ("6.2.14", (6, 2, 14)), ("7.2.4-rc1", (7, 2)), (" 10.0.0\n", (10, 0, 0))],
)
def test_parse_version_reads_the_numbers(text: str, numbers: tuple[int, ...]) -> None:
    assert parse_version(text) == numbers


def test_parse_version_refuses_text_without_one() -> None:
    with pytest.raises(RedisVersionError, match="cannot read a version"):
        parse_version("unknown")


@pytest.mark.parametrize(
    ("info", "named", "supported"),
    [(REDIS_6, "Redis 6.2.14", False), (REDIS_7, "Redis 7.0.15", True), (VALKEY_9, "Valkey 9.1.2", True)],
)
def test_a_server_is_named_by_its_own_release_and_judged_by_redis_version(
    info: str, named: str, supported: bool
) -> None:
    version = server_version(parse_info(info))
    assert str(version) == named
    assert version.meets() is supported
    assert (refusal(version, where="the server") is None) is supported


def test_minimum_is_redis_7_0() -> None:
    assert MINIMUM == (7, 0)
    assert server_version({"redis_version": "6.2.99"}).meets() is False
    assert server_version({"redis_version": "7.0.0"}).meets() is True


def test_refusal_names_the_server_the_minimum_and_the_reason() -> None:
    message = refusal(server_version(parse_info(REDIS_6)), where="the Redis at GATEWAY_REDIS_URL")
    assert message is not None
    assert message.startswith("the Redis at GATEWAY_REDIS_URL is Redis 6.2.14; the gateway needs Redis 7.0")
    assert "Valkey" in message and "SET … NX GET" in message


def test_info_without_a_version_is_an_error() -> None:
    with pytest.raises(RedisVersionError, match="no redis_version"):
        server_version(parse_info("# Server\r\nos:Linux\r\n"))


def test_the_tests_redis_meets_the_minimum_and_takes_set_nx_get(redis_url: str, tenant_name: str) -> None:
    """Run against each server bin/test uses: the system's Redis (7.0, the minimum) and the embedded one."""
    assert require(redis_url, where="the tests' Redis").meets()
    client = redis.Redis.from_url(redis_url)
    try:
        key = f"gw:{{{tenant_name}}}:arm"
        assert client.set(key, "candidate", nx=True, get=True, ex=60) is None
        assert client.set(key, "primary", nx=True, get=True, ex=60) == b"candidate"
        assert client.get(key) == b"candidate"
    finally:
        client.delete(f"gw:{{{tenant_name}}}:arm")
        client.close()


def test_require_refuses_a_real_server_older_than_asked(redis_url: str) -> None:
    reported = server_version(redis.Redis.from_url(redis_url).info("server"))
    with pytest.raises(RedisVersionError) as refused:
        require(redis_url, where="the tests' Redis", minimum=(99, 0))
    assert str(refused.value) == f"the tests' Redis is {reported}; the gateway needs Redis 99.0 or later"


def test_a_server_that_cannot_be_asked_is_not_refused_at_start(dead_redis_url: str) -> None:
    assert check_configured(dead_redis_url) is None


def test_a_server_that_meets_the_minimum_passes_the_start_check(redis_url: str) -> None:
    version = check_configured(redis_url)
    assert version is not None and version.meets()
