"""Values shared across the service. Imports only the standard library."""

from __future__ import annotations

from dataclasses import dataclass

MANAGED_KEY_PREFIX = "key_"
"""Ids of keys managed through the admin API start with it (a config key's id is hex: never does). The
ledger counts their spend on their own, for their budgets."""


@dataclass(frozen=True, slots=True)
class Tenant:
    """A caller of the gateway, resolved from its API key."""

    name: str
    key_id: str
    """A short, non-reversible hash of the key the request used (safe to log and store)."""
    tags: tuple[tuple[str, str], ...] = ()
    """The key's default cost tags (the tenant's, under the key's own), sorted by key."""
    models: frozenset[str] | None = None
    """The models the key may ask for (a managed key's allow-list); None: any the gateway serves."""
    managed: bool = False
    """The key is managed through the admin API (it may have a budget of its own)."""


@dataclass(frozen=True, slots=True)
class Usage:
    """Token usage of one upstream call, as reported by the upstream or counted by the gateway."""

    input_tokens: int = 0
    cached_input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    estimated: bool = False
    cache_write_tokens: int = 0
    """Of the uncached input, the tokens the provider wrote to its cache (GPT-5.6 and later bill them)."""
    cache_write_1h_tokens: int = 0
    """Of ``cache_write_tokens``, those written to a one-hour cache (Anthropic's ``ttl: "1h"``)."""
    tool_uses: tuple[tuple[str, int], ...] = ()
    """Uses of server-side tools the provider bills per use, by kind, sorted (``gateway.servertools``)."""
