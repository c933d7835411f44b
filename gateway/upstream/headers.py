"""The headers a call to a provider carries: the client's that may go up, the provider's own, and its key.

The client's key (a tenant key) never goes up. For an OpenAI-style provider the key goes as
``Authorization: Bearer``, with ``OpenAI-Organization`` / ``OpenAI-Project`` from the config only (they
choose whose account pays and whose objects are reachable); for a ``kind: anthropic`` provider as
``x-api-key``, with ``anthropic-version`` and ``anthropic-beta`` as the client sent them (the beta header
turns on the features the client's request relies on).
"""

from __future__ import annotations

from collections.abc import Mapping

from gateway.base.errors import InvalidRequest
from gateway.config.schema.root import ProviderConfig

FORWARDED_HEADERS = ("accept", "openai-beta", "x-stainless-helper-method")
"""The client's headers that go to an OpenAI-style provider."""
ANTHROPIC_FORWARDED_HEADERS = ("accept", "anthropic-version", "anthropic-beta")
"""The client's headers that go to a ``kind: anthropic`` provider, unchanged."""
ANTHROPIC_VERSION = "2023-06-01"
"""Sent when the client names no ``anthropic-version`` (the API refuses a request without one)."""


def upstream_headers(
    provider: ProviderConfig, incoming: Mapping[str, str], *, content_type: str = "application/json"
) -> dict[str, str]:
    """Raises ``InvalidRequest`` for a forwarded header value that is not printable ASCII."""
    anthropic = provider.kind == "anthropic"
    headers = {"content-type": content_type, "accept": "application/json"}
    for name in ANTHROPIC_FORWARDED_HEADERS if anthropic else FORWARDED_HEADERS:
        value = incoming.get(name)
        if value is not None:
            headers[name] = _ascii_header(name, value)
    if anthropic:
        headers.setdefault("anthropic-version", ANTHROPIC_VERSION)
    else:
        if provider.organization:
            headers["openai-organization"] = provider.organization
        if provider.project:
            headers["openai-project"] = provider.project
    headers.update(provider.headers)
    if provider.api_key:
        if anthropic:
            headers["x-api-key"] = provider.api_key
        else:
            headers["authorization"] = f"Bearer {provider.api_key}"
    return headers


def _ascii_header(name: str, value: str) -> str:
    if value.isascii() and value.isprintable():
        return value
    raise InvalidRequest(
        f"The {name} header must be printable ASCII.", param=name, code="invalid_header_value"
    )
