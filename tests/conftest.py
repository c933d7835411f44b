"""Shared fixtures: a real Redis server (``tests.redis_server`` says which), and a client of one that is
down. Every test that uses the run's Redis is marked ``redis`` (``bin/test`` runs those again against the
embedded server)."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import redis.asyncio as aioredis
from hypothesis import settings as hypothesis_settings

from gateway.redis.server import EmbeddedRedis, EmbeddedRedisError
from tests.ports import free_port
from tests.postgres import NoPostgres, Schemas, test_database
from tests.redis_db import DatabaseRefused, claim_database, worker_database
from tests.redis_server import RedisChoice, redis_choice

# Property tests draw the same examples on every run (no chance in the suite: a failure is found again, not
# by luck), and keep no database of past failures between runs (CI starts clean; so does every machine).
hypothesis_settings.register_profile("deterministic", derandomize=True, database=None)
hypothesis_settings.load_profile("deterministic")

REDIS_CHOICE = pytest.StashKey[RedisChoice]()


def pytest_configure(config: pytest.Config) -> None:
    """Read once, before any test cleans the environment."""
    try:
        config.stash[REDIS_CHOICE] = redis_choice(os.environ)
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from exc


def pytest_report_header(config: pytest.Config) -> str:
    return f"redis: {config.stash[REDIS_CHOICE].describe()}"


PROCESS_TESTS = ("e2e", "deploy", "docs")
"""The folders of tests that start the gateway's processes (``e2e`` on each)."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """``redis`` on every test that uses the run's Redis, ``postgres`` on every one that uses its
    PostgreSQL, directly or through another fixture; ``e2e`` on every test of the folders that start
    processes."""
    tests = Path(__file__).parent
    for item in items:
        if "redis_url" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.redis)
        if "postgres_database" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.postgres)
        if item.path.relative_to(tests).parts[0] in PROCESS_TESTS:
            item.add_marker(pytest.mark.e2e)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def _clean_gateway_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Hygiene: no GATEWAY_* setting leaks from the developer's shell into a test."""
    for name in list(os.environ):
        if name.startswith("GATEWAY_"):
            monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="session")
def redis_url(pytestconfig: pytest.Config, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The run's Redis: the database GATEWAY_TEST_REDIS_URL names (taken only when it is empty or the
    tests', emptied at the end; under pytest-xdist, each worker its own: ``worker_database``), else a
    server the run starts (GATEWAY_TEST_REDIS_SERVER) on a free port, one for each worker."""
    choice = pytestconfig.stash[REDIS_CHOICE]
    if choice.url is not None:
        try:
            claim = claim_database(worker_database(choice.url, os.environ.get("PYTEST_XDIST_WORKER")))
        except DatabaseRefused as exc:
            pytest.exit(str(exc), returncode=pytest.ExitCode.USAGE_ERROR)
        try:
            yield claim.url
        finally:
            claim.release()
        return
    data_dir: Path = tmp_path_factory.mktemp("redis")
    try:
        server = EmbeddedRedis(data_dir, port=free_port(), persist=False, binary=choice.binary())
        server.start()
    except EmbeddedRedisError as exc:
        pytest.exit(f"the tests' Redis: {exc}", returncode=pytest.ExitCode.USAGE_ERROR)
    try:
        yield server.url
    finally:
        server.stop()


@pytest.fixture(scope="session")
def postgres_database(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Schemas]:
    """The run's PostgreSQL database (``tests.postgres``): skips the test, saying why, where there is none."""
    try:
        with test_database(tmp_path_factory.mktemp("postgres")) as url:
            yield Schemas(url)
    except NoPostgres as exc:
        pytest.skip(str(exc))


@pytest.fixture
def archive_url(postgres_database: Schemas) -> str:
    """A PostgreSQL URL whose tables are this test's alone (a schema of its own)."""
    return postgres_database.new()


@pytest.fixture
async def redis_client(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    client = aioredis.Redis.from_url(redis_url)
    try:
        yield client
    finally:
        await client.aclose()


@pytest.fixture
def dead_redis_url() -> str:
    """The URL of a port nothing listens on: every connection is refused at once."""
    return f"redis://127.0.0.1:{free_port()}/0"


@pytest.fixture
async def dead_redis(dead_redis_url: str) -> AsyncIterator[aioredis.Redis]:
    """A client of a Redis that is down (``dead_redis_url``), without retries."""
    client = aioredis.Redis.from_url(dead_redis_url, socket_connect_timeout=0.2, retry=None)
    try:
        yield client
    finally:
        await client.aclose()


@pytest.fixture
def tenant_name() -> str:
    """A tenant name no other test (or concurrent run) uses, so tests share a Redis safely."""
    return f"t-{uuid.uuid4().hex[:12]}"
