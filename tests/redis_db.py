"""The database a test run was told to use (``GATEWAY_TEST_REDIS_URL``), taken only when it is the tests'.

The URL must name its database (``redis://host:6379/9``, or ``?db=9``): a run never picks one on a server
it did not start. It takes the database when it is empty, or holds only what an earlier run of these tests
left behind (their marker key, no live lease): it takes the lease (``SET`` with a TTL, so two concurrent
runs never share a database), marks the database as the tests', and ``FLUSHDB``s it at the end. A database
holding anyone else's keys, or leased by a run still going, is refused with the reason; nothing in it is
touched. A run that crashed leaves its lease to expire; the next run then empties that database and takes it.

A run split over pytest-xdist workers takes a database for each: worker ``gwK`` the named number + K (``gw0``
the named one, ``gw1`` the next, …), each claimed as above (``worker_database``).
"""

from __future__ import annotations

import uuid
from urllib.parse import parse_qsl, urlencode, urlparse, urlunparse

import redis
from redis.connection import parse_url

MARKER = "gateway-tests:database"
"""Never expires: this database holds only what gateway test runs wrote."""
MARKER_TEXT = "keys written by the gateway's tests; emptied when their run ends"
LEASE = "gateway-tests:lease"
LEASE_SECONDS = 6 * 3600
"""Longer than any run; a crashed run's database is free again after this."""

TAKEN, FOREIGN, LEASED = 1, 0, -1
TAKE = """
if redis.call('DBSIZE') > 0 and redis.call('EXISTS', KEYS[2]) == 0 then return 0 end
if redis.call('EXISTS', KEYS[1]) == 1 then return -1 end
redis.call('FLUSHDB')
redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
redis.call('SET', KEYS[2], ARGV[3])
return 1
"""
"""Someone else's keys: 0; a live lease: -1; else empty it (a crashed run's leftovers) and take it: 1."""
RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('FLUSHDB') return 1 end
return 0
"""


class DatabaseRefused(Exception):
    """The named database is not the run's to take; the message says why and what to do."""


class Claim:
    """The database a run writes to; ``release()`` empties it."""

    def __init__(self, url: str, owner: str) -> None:
        self.url = url
        self.owner = owner

    def release(self) -> bool:
        """Empty the database, if the lease is still this run's."""
        client = redis.Redis.from_url(self.url)
        try:
            return bool(client.eval(RELEASE, 1, LEASE, self.owner))
        finally:
            client.close()


def named_database(url: str) -> int:
    """The database ``url`` names; ``DatabaseRefused`` when it names none."""
    database = parse_url(url).get("db")
    if database is None:
        raise DatabaseRefused(
            f"GATEWAY_TEST_REDIS_URL ({redacted(url)}) names no database; name the one the tests may "
            "use and empty, e.g. redis://127.0.0.1:6379/9 (or unix:///path/redis.sock?db=9)"
        )
    return int(database)


def worker_database(url: str, worker: str | None) -> str:
    """The database of ``url`` that one process of the run takes: the named one, or under pytest-xdist
    (``worker``: its ``PYTEST_XDIST_WORKER``, ``gwK``) the named number + K, so no two workers share one."""
    if not worker:
        return url
    number = named_database(url) + int(worker.removeprefix("gw"))
    base, _, query = url.partition("?")
    fields = parse_qsl(query, keep_blank_values=True)
    if any(key == "db" for key, _ in fields):  # kept as text: urlunparse would drop unix:///'s empty host
        return f"{base}?{urlencode([(key, str(number) if key == 'db' else value) for key, value in fields])}"
    return with_database(url, number)


def claim_database(url: str) -> Claim:
    """The database ``url`` names, taken for this run; ``DatabaseRefused`` when it is not the tests'."""
    where = f"GATEWAY_TEST_REDIS_URL: database {named_database(url)} of {redacted(url)}"
    owner = uuid.uuid4().hex
    client = redis.Redis.from_url(url)
    try:
        taken = client.eval(TAKE, 2, LEASE, MARKER, owner, LEASE_SECONDS, MARKER_TEXT)
        keys = client.dbsize()
    except redis.RedisError as exc:
        raise DatabaseRefused(f"{where}: cannot claim it: {exc}") from exc
    finally:
        client.close()
    if taken == FOREIGN:
        raise DatabaseRefused(
            f"{where} holds {keys} keys that are not the tests' (no {MARKER} key); "
            "the tests empty the database they use, so name an empty one"
        )
    if taken == LEASED:
        raise DatabaseRefused(
            f"{where} is in use by another test run ({LEASE} is set; a crashed run's lease "
            f"expires within {LEASE_SECONDS // 3600} h); name another database"
        )
    return Claim(url, owner)


def redacted(url: str) -> str:
    """``url`` without its password, for messages."""
    parts = urlparse(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)[-1]
    user = f"{parts.username}:***@" if parts.username else ":***@"
    return urlunparse(parts._replace(netloc=user + netloc))


def with_database(url: str, number: int) -> str:
    parts = urlparse(url)
    return urlunparse(parts._replace(path=f"/{number}"))
