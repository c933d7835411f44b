"""A Redis database of the test run's own, emptied when the run ends: tests leave nothing behind.

A run claims the first database from 1 to 15 that is empty, or that holds only what an earlier run of
these tests left behind (its marker key, no live lease): it takes the lease (``SET NX`` with a TTL, so two
concurrent runs never share a database), marks the database as the tests', and ``FLUSHDB``s it at the end.
A database holding anyone else's keys is never touched. A run that crashed leaves its lease to expire;
the next run then empties that database and takes it.
"""

from __future__ import annotations

import uuid
from urllib.parse import urlparse, urlunparse

import redis

MARKER = "gateway-tests:database"
"""Never expires: this database holds only what gateway test runs wrote."""
MARKER_TEXT = "keys written by the gateway's tests; emptied when their run ends"
LEASE = "gateway-tests:lease"
LEASE_SECONDS = 6 * 3600
"""Longer than any run; a crashed run's database is free again after this."""
DATABASES = range(1, 16)


TAKE = """
if redis.call('DBSIZE') > 0 and redis.call('EXISTS', KEYS[2]) == 0 then return 0 end
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('FLUSHDB')
redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
redis.call('SET', KEYS[2], ARGV[3])
return 1
"""
"""Someone else's keys: no; a live lease: no; else empty it (a crashed run's leftovers) and take it."""
RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('FLUSHDB') return 1 end
return 0
"""


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


def claim_database(url: str) -> Claim | None:
    """A claimed database of the server at ``url`` (its URL), or None when none is free."""
    owner = uuid.uuid4().hex
    for number in DATABASES:
        candidate = with_database(url, number)
        client = redis.Redis.from_url(candidate)
        try:
            if client.eval(TAKE, 2, LEASE, MARKER, owner, LEASE_SECONDS, MARKER_TEXT):
                return Claim(candidate, owner)
        except redis.ResponseError:  # fewer databases configured, or only database 0 (a cluster)
            return None
        finally:
            client.close()
    return None


def with_database(url: str, number: int) -> str:
    parts = urlparse(url)
    return urlunparse(parts._replace(path=f"/{number}"))
