"""Asking a provider for its own count of a prompt (``/responses/input_tokens``, ``/messages/count_tokens``):
one unbilled call, bounded by the provider's ``input_tokens_timeout``, whose failure of any kind (an
error, a slow or unreadable answer) is logged and leaves the gateway's own count in charge."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping

import anyio
import httpx
import orjson
import structlog

from gateway.config.runtime import Route
from gateway.upstream.clients import UpstreamPool
from gateway.upstream.headers import upstream_headers

log = structlog.get_logger("gateway.counts")

Confirm = Callable[[], Awaitable[int | None]]
"""What asks the provider that will bill a prompt for its count of it, as each front builds it (its own
count endpoint and body); the planning step calls it near a line."""


async def provider_count(
    pool: UpstreamPool, route: Route, *, path: str, content: bytes, headers: Mapping[str, str], event: str
) -> int | None:
    """The ``input_tokens`` the provider of ``route`` answers for ``content`` at ``path`` (under its base
    URL, query string included); None when it has none to give. ``event``: the log event's prefix."""
    provider = route.provider
    client = pool.client(route.provider_name, provider)
    request = httpx.Request(
        "POST",
        f"{provider.base_url}{path}",
        headers=upstream_headers(provider, {**headers, "accept": "application/json"}),
        content=content,
        extensions={"timeout": client.timeout.as_dict()},
    )
    try:
        with anyio.fail_after(provider.input_tokens_timeout):
            response = await client.send(request)
    except (httpx.HTTPError, TimeoutError) as exc:
        log.warning(f"{event}_unavailable", provider=route.provider_name, error=type(exc).__name__)
        return None
    if response.status_code != 200:
        log.warning(f"{event}_unavailable", provider=route.provider_name, status=response.status_code)
        return None
    try:
        tokens = orjson.loads(response.content).get("input_tokens")
    except (orjson.JSONDecodeError, AttributeError):
        tokens = None
    if not isinstance(tokens, int) or isinstance(tokens, bool) or tokens < 0:
        log.warning(f"{event}_unreadable", provider=route.provider_name)
        return None
    return tokens
