"""Small factories for tests: a config file, settings, and an app whose upstream is a respx router."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import respx
import yaml
from starlette.testclient import TestClient

from gateway.config.schema.counting import CountingConfig
from gateway.config.schema.root import ProviderConfig
from gateway.config.settings import Settings
from gateway.edge.app import create_app
from gateway.tokens.counter import TokenCounter

TENANT_KEY = "sk-test-tenant-key"
OTHER_KEY = "sk-test-other-key"
ADMIN_KEY = "admin-test-key"
UPSTREAM = "http://upstream.test/v1"


def make_config(**overrides: Any) -> dict[str, Any]:
    config: dict[str, Any] = {
        "providers": {
            "mock": {
                "base_url": UPSTREAM,
                "api_key": "sk-upstream",
                "retry": {
                    "attempts": 3,
                    "backoff_initial": 0.001,
                    "backoff_max": 0.01,
                    "retry_after_cap": 0.05,
                },
            }
        },
        "models": {
            "gpt-5.4": {
                "provider": "mock",
                "context_window": 1_050_000,
                "fallbacks": ["gpt-5.2"],
                "pricing": {
                    "input": "2.50",
                    "cached_input": "0.25",
                    "output": "15.00",
                    "tiers": [
                        {
                            "above_input_tokens": 272_000,
                            "input_multiplier": 2,
                            "cached_input_multiplier": 2,
                            "output_multiplier": "1.5",
                        }
                    ],
                },
            },
            "gpt-5.2": {"provider": "mock", "context_window": 400_000},
            "small": {"provider": "mock", "upstream_model": "gpt-5.4-mini", "context_window": 400_000},
            "text-embedding-3-small": {"provider": "mock", "kind": "embedding", "context_window": 8191},
        },
        "tenants": {
            "acme": {"keys": [TENANT_KEY]},
            "globex": {"keys": [OTHER_KEY]},
        },
    }
    config.update(overrides)
    return config


def write_config(path: Path, config: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


@functools.cache
def shared_counter() -> TokenCounter:
    """One token counter for the whole test session: loading the vocabularies takes about a second."""
    return TokenCounter.build(CountingConfig(), {})


@contextmanager
def gateway_client(
    tmp_path: Path,
    redis_url: str,
    router: respx.Router,
    *,
    config: dict[str, Any] | None = None,
    reload_interval: float = 2.0,
) -> Iterator[TestClient]:
    """The app with its lifespan running, its providers served by ``router``."""
    config_path = write_config(tmp_path / "gateway.yaml", config or make_config())
    settings = Settings(
        config=config_path,
        redis_url=redis_url,
        admin_key=ADMIN_KEY,
        data_dir=tmp_path / "data",
        reload_interval=reload_interval,
    )

    def factory(provider: ProviderConfig) -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=httpx.MockTransport(router.async_handler))

    app = create_app(settings, client_factory=factory, counter=shared_counter())
    with TestClient(app, headers={"authorization": f"Bearer {TENANT_KEY}"}) as client:
        yield client


def chat_body(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"model": "gpt-5.4", "messages": [{"role": "user", "content": "Hello there"}]}
    body.update(overrides)
    return body


def completion(
    content: str = "Hi!", *, model: str = "gpt-5.4", usage: dict[str, Any] | None = None
) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": model,
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
        ],
        "usage": usage or {"prompt_tokens": 9, "completion_tokens": 3, "total_tokens": 12},
    }
