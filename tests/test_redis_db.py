"""The test run's own Redis database: claimed once, never shared, never someone else's, emptied at the end.
Run against a server of its own, so that these tests can fill databases freely."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from gateway.redisserver import EmbeddedRedis, free_port
from tests.redis_db import LEASE, MARKER, claim_database, with_database


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    with EmbeddedRedis(tmp_path, port=free_port(), persist=False) as embedded:
        yield embedded.url


def database(url: str, number: int) -> redis.Redis:
    return redis.Redis.from_url(with_database(url, number))


def test_concurrent_runs_get_databases_of_their_own_and_leave_them_empty(server: str) -> None:
    first, second = claim_database(server), claim_database(server)
    assert first is not None and second is not None
    assert (first.url, second.url) == (with_database(server, 1), with_database(server, 2))
    database(server, 1).set("gw:{t}:written", "by a test")
    assert first.release()
    assert database(server, 1).dbsize() == 0
    assert database(server, 2).exists(LEASE)  # the other run's database is untouched
    assert second.release()


def test_someone_elses_database_is_never_claimed_nor_emptied(server: str) -> None:
    database(server, 1).set("their:key", "theirs")
    claim = claim_database(server)
    assert claim is not None and claim.url == with_database(server, 2)
    claim.release()
    assert database(server, 1).get("their:key") == b"theirs"


def test_a_crashed_runs_database_is_emptied_and_taken_once_its_lease_is_gone(server: str) -> None:
    crashed = claim_database(server)
    assert crashed is not None
    database(server, 1).set("left:behind", "1")
    other = claim_database(server)
    assert other is not None and other.url != crashed.url  # leased: not taken while the run may be alive
    database(server, 1).delete(LEASE)  # the lease expired
    again = claim_database(server)
    assert again is not None and again.url == crashed.url
    assert database(server, 1).exists("left:behind") == 0 and database(server, 1).exists(MARKER)
    assert not crashed.release()  # the lease is no longer the crashed run's: it empties nothing
    assert database(server, 1).exists(MARKER)
