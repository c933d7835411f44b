"""A tenant in the config: its API keys (held as sha256 digests), their default cost tags, what the
tenant's requests may do, and its response cache."""

from __future__ import annotations

import hashlib
import importlib
from collections.abc import Callable
from typing import Literal, Protocol, cast

from pydantic import Field, field_validator

from gateway.base.tags import TagProblem, from_mapping
from gateway.config.schema.base import Strict as _Strict
from gateway.config.schema.ledger import BudgetConfig
from gateway.config.schema.rate_limits import RateLimitsConfig
from gateway.config.schema.response_cache import ResponseCacheConfig
from gateway.servertools.kinds import ServerToolKind

KEY_HASH_PREFIX = "sha256:"


SharedObjectKind = Literal[
    "files", "vector_stores", "containers", "conversations", "skills", "prompts", "response_items"
]
"""Kinds of objects the provider keeps for its whole account that a request body may name by id
(``gateway.core.shared_objects``)."""


def _checked_tags(value: dict[str, str]) -> dict[str, str]:
    try:
        return from_mapping(value, where="tags")
    except TagProblem as exc:
        raise ValueError(str(exc)) from None


def key_limits(value: RateLimitsConfig | None) -> RateLimitsConfig | None:
    """A key's rate limits (in the config or managed by API): what to do with Redis down is the tenant's."""
    if value is not None and value.on_redis_down is not None:
        raise ValueError("on_redis_down is the tenant's to set (its rate_limits or budget), not a key's")
    return value


class TenantKey(_Strict):
    """A key with default cost tags or its own rate limits: ``{key: ${ACME_SEARCH_KEY}, tags: {team:
    search}, rate_limits: {requests_per_minute: 60}}``."""

    key: str = Field(description="the API key, as a ${ENV} reference or sha256:<hex>")
    tags: dict[str, str] = Field(
        default_factory=dict, description="cost tags of this key's requests, under the request's own"
    )
    rate_limits: RateLimitsConfig | None = Field(
        default=None,
        description="limits on this key's requests, besides the tenant's (docs/how-to/rate-limits.md)",
    )

    _tags = field_validator("tags")(_checked_tags)
    _limits = field_validator("rate_limits")(key_limits)


class TenantConfig(_Strict):
    keys: tuple[str | TenantKey, ...] = Field(
        default=(),
        description="API keys, as ${ENV} references or sha256:<hex>, or {key, tags, rate_limits} with "
        "default cost tags or limits of their own; none only with keys.managed (all the tenant's keys are "
        "managed through the admin API)",
    )
    tags: dict[str, str] = Field(
        default_factory=dict,
        description="cost tags of every request of the tenant's keys, under the key's and the request's own",
    )
    allow_passthrough: bool = Field(
        default=False, description="may opt out of policies per request with x-gateway-policy: passthrough"
    )
    allow_unknown_responses: bool = Field(
        default=False,
        description="may name response ids the gateway never saw this tenant create (by-id routes and "
        "previous_response_id); other tenants' ids are refused regardless",
    )
    shared_objects: tuple[SharedObjectKind, ...] = Field(
        default=(),
        description="kinds of the provider's account-wide objects the tenant's requests may name by id "
        "(file ids, vector stores, prompts, ...); a passthrough entry granting the kind's path grants it too",
    )
    report_prompt_tokens: Literal["forwarded", "received"] = Field(
        default="forwarded",
        description="what usage says of a prompt the gateway rewrote: as forwarded (billed), or as received",
    )
    budget: BudgetConfig | None = None
    rate_limits: RateLimitsConfig | None = Field(
        default=None,
        description="requests, tokens and dollars per minute over all the tenant's keys, and per model "
        "(docs/how-to/rate-limits.md)",
    )
    token_counts_per_minute: int | None = Field(
        default=None,
        ge=1,
        description="token counting calls (count_tokens, input_tokens) a minute; unset: limits' value",
    )
    experiments: bool = Field(
        default=True,
        description="false: never mirrored to an experiment's candidate nor split to one (data that may not "
        "go to another model or provider)",
    )
    server_tools: bool | tuple[ServerToolKind, ...] = Field(
        default=True,
        description="the tools the provider runs itself (web search, file search, code execution, ...) the "
        "tenant may offer a model: true (all), false (none), or a list of kinds; others are refused (400)",
    )
    response_cache: ResponseCacheConfig | None = Field(
        default=None,
        description="answer repeated requests from an exact cache of this tenant's own answers (no upstream "
        "call, cost 0); unset: off",
    )

    _tags = field_validator("tags")(_checked_tags)

    def key_hashes(self) -> tuple[str, ...]:
        """sha256 hex digests of this tenant's keys; empty keys (an unset variable) never authenticate."""
        return tuple(digest for digest, _ in self.key_tags())

    def key_tags(self) -> tuple[tuple[str, tuple[tuple[str, str], ...]], ...]:
        """Each key's sha256 digest with its default tags (the tenant's under the key's, sorted)."""
        found = []
        for entry in self.keys:
            own = None if isinstance(entry, str) else entry.tags
            digest = key_digest(key_text(entry))
            if digest is not None:
                found.append((digest, tuple(sorted({**self.tags, **(own or {})}.items()))))
        return tuple(found)

    def key_rate_limits(self) -> tuple[tuple[str, RateLimitsConfig], ...]:
        """The sha256 hex digest of each key that has rate limits of its own, with them."""
        found = []
        for entry in self.keys:
            if isinstance(entry, TenantKey) and entry.rate_limits is not None:
                digest = key_digest(entry.key)
                if digest is not None:
                    found.append((digest, entry.rate_limits))
        return tuple(found)


def key_text(entry: str | TenantKey) -> str:
    """A configured key, with or without default tags."""
    return entry if isinstance(entry, str) else entry.key


def key_digest(key: str) -> str | None:
    """The sha256 hex digest of a configured key (``sha256:<hex>`` or plain); None for an empty one."""
    if key.startswith(KEY_HASH_PREFIX):
        return key.removeprefix(KEY_HASH_PREFIX).lower()
    return hash_key(key) if key else None


class _Digest(Protocol):
    def hexdigest(self) -> str: ...


def hash_key(key: str) -> str:
    """The sha256 hex digest of an API key, as configured keys are written (``sha256:<hex>``)."""
    return _SHA256(key.encode()).hexdigest()


def _sha256() -> Callable[[bytes], _Digest]:
    """CPython's own SHA-256 when the interpreter has it (``_sha2`` from 3.12, ``_sha256`` before), else
    hashlib's. A request's key is hashed once, cold (the last request was long ago at low traffic): there
    OpenSSL's dispatch costs about 15-40 µs against 10 for the built-in, for the same 32-byte digest."""
    for name in ("_sha2", "_sha256"):
        try:
            return cast(Callable[[bytes], _Digest], importlib.import_module(name).sha256)
        except (ImportError, AttributeError):
            continue
    return hashlib.sha256


_SHA256 = _sha256()
