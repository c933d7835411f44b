"""The test run's Redis database: only the one GATEWAY_TEST_REDIS_URL names, never someone else's, never
shared by two runs at once, emptied at the end. Run against a server of their own, so that these tests
can fill databases freely."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from gateway.redis.server import EmbeddedRedis
from tests.ports import free_port
from tests.redis_db import (
    LEASE,
    MARKER,
    DatabaseRefused,
    claim_database,
    redacted,
    with_database,
    worker_database,
)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    with EmbeddedRedis(tmp_path, port=free_port(), persist=False) as embedded:
        yield embedded.url


def database(url: str, number: int) -> redis.Redis:
    return redis.Redis.from_url(with_database(url, number))


def test_the_named_database_is_taken_and_emptied_at_the_end(server: str) -> None:
    claim = claim_database(with_database(server, 7))
    assert claim.url == with_database(server, 7)
    assert database(server, 7).exists(MARKER, LEASE) == 2
    database(server, 7).set("gw:{t}:written", "by a test")
    database(server, 0).set("their:key", "theirs")  # another database: never looked at
    assert claim.release()
    assert database(server, 7).dbsize() == 0
    assert database(server, 0).get("their:key") == b"theirs"


@pytest.mark.parametrize("url", ["redis://127.0.0.1:{port}", "redis://127.0.0.1:{port}/"])
def test_a_url_naming_no_database_is_refused(server: str, url: str) -> None:
    port = redis.Redis.from_url(server).connection_pool.connection_kwargs["port"]
    with pytest.raises(DatabaseRefused, match="names no database"):
        claim_database(url.format(port=port))
    assert database(server, 0).dbsize() == 0  # nothing written anywhere


def test_the_database_can_be_named_as_a_query_parameter(server: str) -> None:
    claim = claim_database(with_database(server, 0).rsplit("/", 1)[0] + "/?db=4")
    assert database(server, 4).exists(LEASE) and database(server, 0).dbsize() == 0
    assert claim.release()


def test_someone_elses_database_is_refused_and_left_untouched(server: str) -> None:
    database(server, 3).set("their:key", "theirs")
    with pytest.raises(DatabaseRefused, match=r"database 3 of .* holds 1 keys that are not the tests'"):
        claim_database(with_database(server, 3))
    assert database(server, 3).keys() == [b"their:key"]


def test_a_database_another_run_holds_is_refused(server: str) -> None:
    first = claim_database(with_database(server, 2))
    database(server, 2).set("gw:{t}:written", "by the first run")
    with pytest.raises(DatabaseRefused, match="in use by another test run"):
        claim_database(with_database(server, 2))
    assert database(server, 2).get("gw:{t}:written") == b"by the first run"
    assert first.release()


def test_a_crashed_runs_database_is_emptied_and_taken_once_its_lease_is_gone(server: str) -> None:
    crashed = claim_database(with_database(server, 1))
    database(server, 1).set("left:behind", "1")
    database(server, 1).delete(LEASE)  # the lease expired
    again = claim_database(with_database(server, 1))
    assert database(server, 1).exists("left:behind") == 0 and database(server, 1).exists(MARKER)
    assert not crashed.release()  # the lease is no longer the crashed run's: it empties nothing
    assert database(server, 1).exists(MARKER)
    assert again.release()


def test_messages_never_show_a_password() -> None:
    assert redacted("redis://:s3cret@host:6379/2") == "redis://:***@host:6379/2"
    assert redacted("rediss://user:s3cret@host/2") == "rediss://user:***@host/2"
    assert redacted("redis://host:6379/2") == "redis://host:6379/2"


@pytest.mark.parametrize(
    ("url", "worker", "expected"),
    [
        ("redis://host:6379/9", None, "redis://host:6379/9"),
        ("redis://host:6379/9", "", "redis://host:6379/9"),
        ("redis://host:6379/9", "gw0", "redis://host:6379/9"),
        ("redis://:pw@host:6379/9", "gw1", "redis://:pw@host:6379/10"),
        ("unix:///run/redis.sock?db=9", "gw2", "unix:///run/redis.sock?db=11"),
    ],
)
def test_each_worker_takes_a_database_of_its_own(url: str, worker: str | None, expected: str) -> None:
    assert worker_database(url, worker) == expected


def test_two_workers_of_one_run_each_claim_their_database(server: str) -> None:
    first = claim_database(worker_database(with_database(server, 5), "gw0"))
    second = claim_database(worker_database(with_database(server, 5), "gw1"))  # not refused as in use
    assert database(server, 5).exists(LEASE) and database(server, 6).exists(LEASE)
    assert first.release() and second.release()
