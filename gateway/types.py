"""Values shared across the service. Imports only the standard library."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Tenant:
    """A caller of the gateway, resolved from its API key."""

    name: str
    key_id: str
    """A short, non-reversible hash of the key the request used (safe to log and store)."""


@dataclass(frozen=True, slots=True)
class Usage:
    """Token usage of one upstream call, as reported by the upstream or counted by the gateway."""

    input_tokens: int = 0
    cached_input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    estimated: bool = False


@dataclass(slots=True)
class CallOutcome:
    """What the gateway learned about one upstream exchange (filled in as the response passes)."""

    status: int = 0
    upstream_model: str = ""
    provider: str = ""
    retries: int = 0
    upstream_seconds: float = 0.0
    first_token_seconds: float | None = None
    finish_reason: str | None = None
    usage: Usage | None = None
    stream: bool = False
    client_disconnected: bool = False
    error_type: str | None = None
    extra: dict[str, object] = field(default_factory=dict)
