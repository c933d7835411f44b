"""Running the mock upstream beside the gateway, and what its start tells a person.

``MockUpstream.start`` binds a free port on 127.0.0.1 (bound here, so the port is known before any config
is read and no other process can take it meanwhile), serves the mock's app on it from a thread of the
serving process (``gateway serve`` starts it before any worker, so with ``--workers N`` there is still
one mock), and sets the provider variables of the config (``OPENAI_BASE_URL``, ``ANTHROPIC_BASE_URL``)
to it, with placeholder keys: a real key in the shell never reaches the mock. The workers inherit the
environment, and so do config reloads. A config whose providers name their URL without those variables
is not redirected: ``redirect_notices`` says so, provider by provider.

``try_lines`` is what the start prints for a person: the tenant key (``DEFAULT_TENANT_KEY``, the example
config's default tenant's; made for this run when unset, as ``./bin/run`` makes one for every run) and a
request to paste. The key is printed only here, in the mock's mode: it is a key to a gateway that spends
nothing.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import threading
from dataclasses import dataclass

import uvicorn

from gateway.config.schema.root import GatewayConfig, hash_key
from gateway.mockupstream.app import create_mock_app

TENANT_KEY_VARIABLE = "DEFAULT_TENANT_KEY"
PLACEHOLDER_KEY = "mock-upstream-key"
BASE_URL_VARIABLES = ("OPENAI_BASE_URL", "ANTHROPIC_BASE_URL")
KEY_VARIABLES = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")
STOP_SECONDS = 5.0


@dataclass
class MockUpstream:
    server: uvicorn.Server
    thread: threading.Thread
    port: int

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @classmethod
    def start(cls) -> MockUpstream:
        """Serve the mock on a free local port and point the provider variables at it."""
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sock.listen()  # calls made before the thread serves wait in the backlog, never refused
        port = int(sock.getsockname()[1])
        config = uvicorn.Config(
            create_mock_app(), log_config=None, access_log=False, lifespan="off", log_level="warning"
        )
        server = uvicorn.Server(config)
        thread = threading.Thread(
            target=server.run, kwargs={"sockets": [sock]}, name="mock-upstream", daemon=True
        )
        thread.start()
        mock = cls(server, thread, port)
        for name in BASE_URL_VARIABLES:
            os.environ[name] = mock.base_url
        for name in KEY_VARIABLES:
            os.environ[name] = PLACEHOLDER_KEY
        return mock

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(STOP_SECONDS)


def tenant_key() -> str:
    """``DEFAULT_TENANT_KEY``, made and exported (for the config and the workers) when unset."""
    key = os.environ.get(TENANT_KEY_VARIABLE)
    if not key:
        key = "sk-gw-" + secrets.token_urlsafe(24)
        os.environ[TENANT_KEY_VARIABLE] = key
    return key


def redirect_notices(config: GatewayConfig, mock: MockUpstream) -> list[str]:
    """A line for each provider the mock does not stand in for: its calls would leave the machine."""
    return [
        f"provider {name} still calls {provider.base_url}: --mock-upstream points only "
        f"${{OPENAI_BASE_URL}} and ${{ANTHROPIC_BASE_URL}} at the mock"
        for name, provider in config.providers.items()
        if provider.base_url.rstrip("/") != mock.base_url
    ]


def try_lines(config: GatewayConfig, mock: MockUpstream, key: str, *, host: str, port: int) -> list[str]:
    """What to print: where the mock is, the tenant key and whose it is, and what to paste (those lines
    indented, without the ``gateway:`` the others start with, so that a triple click copies them whole)."""
    said = [
        f"mock upstream at {mock.base_url}: canned answers in the OpenAI and Anthropic APIs, no provider key"
    ]
    said += [f"warning: {notice}" for notice in redirect_notices(config, mock)]
    digest = hash_key(key)
    tenant = next((name for name, t in config.tenants.items() if digest in t.key_hashes()), None)
    if tenant is None:
        said.append(
            f"warning: no tenant of the config has the key in {TENANT_KEY_VARIABLE}: use one of yours"
        )
        return [f"gateway: {line}" for line in said]
    gateway = f"http://{_reachable(host)}:{port}"
    said.append(f"tenant {tenant}'s key ({TENANT_KEY_VARIABLE}): {key}")
    lines = [f"gateway: {line}" for line in said]
    request = _request(config, gateway, key)
    if request is not None:
        lines += ["gateway: try it (once the gateway says it is running):", f"  {request}"]
    lines += [
        "gateway: or point an SDK at it:",
        f"  export OPENAI_BASE_URL={gateway}/v1 OPENAI_API_KEY={key}",
    ]
    return lines


def _request(config: GatewayConfig, gateway: str, key: str) -> str | None:
    """A curl line for the config's first chat model, on chat completions (on Messages for a model of an
    ``anthropic`` provider)."""
    hello = [{"role": "user", "content": "Hello"}]
    for name, model in config.models.items():
        if model.kind != "chat":
            continue
        if config.providers[model.provider].kind == "anthropic":
            body = json.dumps({"model": name, "max_tokens": 100, "messages": hello})
            return (
                f"curl -s {gateway}/v1/messages -H 'x-api-key: {key}' -H 'anthropic-version: 2023-06-01' "
                f"-H 'content-type: application/json' -d '{body}'"
            )
        body = json.dumps({"model": name, "messages": hello})
        return (
            f"curl -s {gateway}/v1/chat/completions -H 'Authorization: Bearer {key}' "
            f"-H 'content-type: application/json' -d '{body}'"
        )
    return None


def _reachable(host: str) -> str:
    """The address to call for a server listening on ``host``: a wildcard address is reached locally."""
    if host in ("0.0.0.0", "", "::"):
        return "127.0.0.1"
    return f"[{host}]" if ":" in host else host
