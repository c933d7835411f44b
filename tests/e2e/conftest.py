from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest

from tests.e2e.processes import gateway_process, mock_upstream
from tests.factories import OTHER_KEY, TENANT_KEY, make_config, write_config


@pytest.fixture(scope="session")
def e2e_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("e2e")


@pytest.fixture(scope="session")
def mock_url(e2e_dir: Path) -> Iterator[str]:
    with mock_upstream(e2e_dir) as url:
        yield url


@pytest.fixture(scope="session")
def gateway_url(e2e_dir: Path, mock_url: str, redis_url: str) -> Iterator[str]:
    suffix = uuid.uuid4().hex[:8]  # fresh tenants: no summary or index cached by an earlier run
    config = make_config(
        tenants={f"acme-{suffix}": {"keys": [TENANT_KEY]}, f"globex-{suffix}": {"keys": [OTHER_KEY]}}
    )
    config["providers"]["mock"]["base_url"] = f"{mock_url}/v1".replace("127.0.0.1", "localhost")
    path = write_config(e2e_dir / "gateway.yaml", config)
    with gateway_process(path, redis_url, e2e_dir) as url:
        yield url


@pytest.fixture
def mock(mock_url: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=mock_url) as client:
        client.post("/_reset")
        yield client
        client.post("/_reset")


@pytest.fixture
def client(gateway_url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{gateway_url}/v1", api_key=TENANT_KEY, max_retries=0)


@pytest.fixture
def other_client(gateway_url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{gateway_url}/v1", api_key=OTHER_KEY, max_retries=0)
