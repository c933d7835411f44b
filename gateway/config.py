"""The YAML config schema (pydantic, at the edge). Loading lives in ``gateway.configfile``."""

from __future__ import annotations

import hashlib
from decimal import Decimal
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from gateway.ledger.schema import BudgetConfig, LedgerConfig
from gateway.sampling.config import SamplingConfig
from gateway.tokens.config import CountingConfig
from policies import PoliciesConfig

KEY_HASH_PREFIX = "sha256:"


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
        hashes = []
        for key in self.keys:
            if key.startswith(KEY_HASH_PREFIX):
                hashes.append(key.removeprefix(KEY_HASH_PREFIX).lower())
            elif key:
                hashes.append(hash_key(key))
        return tuple(hashes)


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
        for name, model in self.models.items():
            if model.provider not in self.providers:
                raise ValueError(f"models.{name}.provider: unknown provider {model.provider!r}")
            for fallback in model.fallbacks:
                if fallback not in self.models:
                    raise ValueError(f"models.{name}.fallbacks: unknown model {fallback!r}")
        seen: dict[str, str] = {}
        for tenant_name, tenant in self.tenants.items():
            for digest in tenant.key_hashes():
                if digest in seen and seen[digest] != tenant_name:
                    raise ValueError(f"tenants.{tenant_name}: a key is shared with tenant {seen[digest]!r}")
                seen[digest] = tenant_name
        return self


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()
