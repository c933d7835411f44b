"""The YAML config schema (pydantic, at the edge). Loading lives in ``gateway.configfile``."""

from __future__ import annotations

import hashlib
from decimal import Decimal
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from gateway.ledger.schema import BudgetConfig, LedgerConfig
from gateway.sampling.config import SamplingConfig
from gateway.tokens.config import CountingConfig, EncodingName
from policies import PoliciesConfig

KEY_HASH_PREFIX = "sha256:"
ENCODINGS: tuple[str, ...] = get_args(EncodingName)
"""The tiktoken encodings a model's ``encoding`` may name: those the gateway ships."""

Loc = tuple[str | int, ...]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Timeouts(_Strict):
    connect: float = Field(default=5.0, gt=0)
    read: float = Field(default=600.0, gt=0)
    write: float = Field(default=30.0, gt=0)
    pool: float = Field(default=5.0, gt=0)


class RetryConfig(_Strict):
    attempts: int = Field(default=3, ge=1, le=10, description="attempts per candidate model, first included")
    backoff_initial: float = Field(default=0.25, ge=0, description="seconds before the first retry")
    backoff_max: float = Field(default=8.0, ge=0, description="cap of the exponential backoff")
    retry_after_cap: float = Field(default=30.0, ge=0, description="longest Retry-After honoured")


class ProviderConfig(_Strict):
    base_url: str
    api_key: str | None = None
    timeouts: Timeouts = Timeouts()
    retry: RetryConfig = RetryConfig()
    max_connections: int = Field(default=256, ge=1)
    headers: dict[str, str] = Field(default_factory=dict, description="extra headers sent upstream")
    responses_input_tokens: bool = Field(
        default=False,
        description="the provider answers POST /responses/input_tokens: a Responses count near a line is "
        "confirmed with it",
    )
    input_tokens_timeout: float = Field(default=3.0, gt=0, description="seconds to wait for that count")

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError("base_url must start with http:// or https://")
        return value.rstrip("/")


class PriceTier(_Strict):
    above_input_tokens: int = Field(gt=0)
    input_multiplier: Decimal = Field(default=Decimal(1), gt=0)
    cached_input_multiplier: Decimal = Field(default=Decimal(1), gt=0)
    output_multiplier: Decimal = Field(default=Decimal(1), gt=0)
    scope: Literal["whole_request", "marginal"] = "whole_request"


class ModelPricing(_Strict):
    """USD per million tokens; up to three decimals keep every cost an exact number of nano-dollars."""

    input: Decimal = Field(ge=0, decimal_places=3)
    cached_input: Decimal | None = Field(default=None, ge=0, decimal_places=3)
    output: Decimal = Field(ge=0, decimal_places=3)
    tiers: tuple[PriceTier, ...] = ()
    taken: str | None = Field(default=None, description="when the price was read from the provider")

    @field_validator("tiers")
    @classmethod
    def _ascending(cls, tiers: tuple[PriceTier, ...]) -> tuple[PriceTier, ...]:
        lines = [tier.above_input_tokens for tier in tiers]
        if lines != sorted(set(lines)):
            raise ValueError("tiers must have distinct above_input_tokens in ascending order")
        return tiers


class ModelConfig(_Strict):
    provider: str
    upstream_model: str | None = Field(default=None, description="name sent upstream; default: the key")
    encoding: str | None = Field(default=None, description="tiktoken encoding; default from the name")
    context_window: int = Field(default=128_000, gt=0)
    max_output_tokens: int | None = Field(default=None, gt=0)
    pricing: ModelPricing | None = None
    fallbacks: tuple[str, ...] = ()
    kind: Literal["chat", "embedding"] = "chat"


class TenantConfig(_Strict):
    keys: tuple[str, ...] = Field(min_length=1, description="API keys, as ${ENV} references or sha256:<hex>")
    allow_passthrough: bool = Field(
        default=False, description="may opt out of policies per request with x-gateway-policy: passthrough"
    )
    budget: BudgetConfig | None = None

    def key_hashes(self) -> tuple[str, ...]:
        """sha256 hex digests of this tenant's keys; empty keys (an unset variable) never authenticate."""
        return tuple(digest for digest in map(key_digest, self.keys) if digest is not None)


def key_digest(key: str) -> str | None:
    """The sha256 hex digest of a configured key (``sha256:<hex>`` or plain); None for an empty one."""
    if key.startswith(KEY_HASH_PREFIX):
        return key.removeprefix(KEY_HASH_PREFIX).lower()
    return hash_key(key) if key else None


class Limits(_Strict):
    max_body_bytes: int = Field(default=64 * 1024 * 1024, gt=0)


class GatewayConfig(_Strict):
    providers: dict[str, ProviderConfig]
    models: dict[str, ModelConfig]
    tenants: dict[str, TenantConfig] = Field(default_factory=dict)
    policies: PoliciesConfig | None = None
    sampling: SamplingConfig = SamplingConfig()
    limits: Limits = Limits()
    ledger: LedgerConfig = LedgerConfig()
    counting: CountingConfig = CountingConfig()

    @model_validator(mode="after")
    def _references(self) -> GatewayConfig:
        problems = reference_problems(self)
        if problems:
            raise ReferenceProblems(problems)
        return self


class ReferenceProblems(ValueError):
    """Names in one section that do not resolve in another; ``problems`` are (location, message) pairs,
    all of them, so that a config file's loader can name the line of each."""

    def __init__(self, problems: list[tuple[Loc, str]]) -> None:
        self.problems = problems
        super().__init__("; ".join(f"{'.'.join(map(str, loc))}: {message}" for loc, message in problems))


def reference_problems(config: GatewayConfig) -> list[tuple[Loc, str]]:
    """Unknown providers, encodings and fallbacks of models, and keys shared by two tenants."""
    problems: list[tuple[Loc, str]] = []
    for name, model in config.models.items():
        if model.provider not in config.providers:
            problems.append((("models", name, "provider"), f"unknown provider {model.provider!r}"))
        if model.encoding is not None and model.encoding not in ENCODINGS:
            known = ", ".join(ENCODINGS)
            problems.append(
                (("models", name, "encoding"), f"unknown encoding {model.encoding!r} (known: {known})")
            )
        for index, fallback in enumerate(model.fallbacks):
            if fallback not in config.models:
                problems.append((("models", name, "fallbacks", index), f"unknown model {fallback!r}"))
    seen: dict[str, str] = {}
    for tenant_name, tenant in config.tenants.items():
        for index, key in enumerate(tenant.keys):
            digest = key_digest(key)
            if digest is None:
                continue
            owner = seen.setdefault(digest, tenant_name)
            if owner != tenant_name:
                problems.append(
                    (("tenants", tenant_name, "keys", index), f"a key is shared with tenant {owner!r}")
                )
    return problems


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()
