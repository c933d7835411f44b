"""The YAML config schema (pydantic, at the edge). Loading lives in ``gateway.config.loading``."""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Annotated, Literal, get_args

from pydantic import Field, StringConstraints, field_validator, model_validator

from gateway.config.schema.alerts import AlertsConfig
from gateway.config.schema.base import Strict
from gateway.config.schema.counting import CountingConfig, EncodingName
from gateway.config.schema.experiments import ExperimentConfig
from gateway.config.schema.keys import KeysConfig
from gateway.config.schema.ledger import LedgerConfig
from gateway.config.schema.limits import Limits as Limits
from gateway.config.schema.passthrough import PASSTHROUGH_METHODS as PASSTHROUGH_METHODS
from gateway.config.schema.passthrough import SHARED_OBJECTS as SHARED_OBJECTS
from gateway.config.schema.passthrough import PassthroughRoute as PassthroughRoute
from gateway.config.schema.rate_limits import RateLimitsConfig
from gateway.config.schema.sampling import SamplingConfig
from gateway.config.schema.telemetry import TelemetryConfig
from gateway.config.schema.tenants import KEY_HASH_PREFIX as KEY_HASH_PREFIX
from gateway.config.schema.tenants import SharedObjectKind as SharedObjectKind
from gateway.config.schema.tenants import TenantConfig as TenantConfig
from gateway.config.schema.tenants import TenantKey as TenantKey
from gateway.config.schema.tenants import hash_key as hash_key
from gateway.config.schema.tenants import key_digest as key_digest
from gateway.config.schema.tenants import key_text as key_text
from policies import PoliciesConfig

ENCODINGS: tuple[str, ...] = get_args(EncodingName)
"""The tiktoken encodings a model's ``encoding`` may name: those the gateway ships."""

Loc = tuple[str | int, ...]


_Strict = Strict


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


class PromptCacheConfig(_Strict):
    """How the provider caches prompt prefixes (OpenAI's rules by default): what the gateway assumes when
    it prices what forwarding a request unchanged would have cost, and when it keeps a rewrite stable."""

    min_prefix_tokens: int = Field(default=1024, ge=0, description="a shorter prompt is never cached")
    granularity: int = Field(default=128, ge=1, description="cached prefixes grow in steps of this many")
    retention_seconds: float = Field(
        default=300.0, gt=0, description="an idle prefix stays cached this long after its last use"
    )
    extended_retention_seconds: float = Field(
        default=86_400.0, gt=0, description='the same with prompt_cache_retention: "24h" in the request'
    )
    write_multiplier: Decimal = Field(
        default=Decimal(0),
        ge=0,
        description="cache writes (usage cache_write_tokens) cost this times the input price; 0: not billed "
        "apart (1.25 for GPT-5.6 and later)",
    )


class ProviderConfig(_Strict):
    base_url: str
    api_key: str | None = None
    kind: Literal["openai", "anthropic"] = Field(
        default="openai",
        description="the API the provider speaks: openai (chat, Responses, embeddings; Authorization: "
        "Bearer) or anthropic (Messages; x-api-key, anthropic-version)",
    )
    messages_count_tokens: bool = Field(
        default=False,
        description="the provider answers POST /messages/count_tokens: a Messages count near a line is "
        "confirmed with it, and a client's count_tokens is answered by it",
    )
    confirm_messages_counts: Literal["near_line", "always"] = Field(
        default="near_line",
        description="with messages_count_tokens: confirm a Messages count with the provider only near a line "
        "(within the policy's confirm_within_ratio of the estimate), or before every decision (one more "
        "unbilled call per request)",
    )
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
    organization: str | None = Field(
        default=None, description="sent as OpenAI-Organization; clients cannot choose it"
    )
    project: str | None = Field(default=None, description="sent as OpenAI-Project; clients cannot choose it")
    prompt_cache: PromptCacheConfig = PromptCacheConfig()

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


ToolKindName = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]{0,63}$")]
UsdPerUse = Annotated[Decimal, Field(ge=0, decimal_places=9)]


class ModelPricing(_Strict):
    """USD per million tokens; up to three decimals keep every cost an exact number of nano-dollars."""

    input: Decimal = Field(ge=0, decimal_places=3)
    cached_input: Decimal | None = Field(default=None, ge=0, decimal_places=3)
    output: Decimal = Field(ge=0, decimal_places=3)
    tiers: tuple[PriceTier, ...] = ()
    per_use: dict[ToolKindName, UsdPerUse] = Field(
        default_factory=dict,
        description="USD per use of a server-side tool the provider bills per use, by kind (web_search, "
        "web_fetch, file_search, code_interpreter per container, image_generation per image), on top of "
        "the tokens; a use the provider reports of a kind not listed here is billed $0, logged and counted",
    )
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
    prompt_cache: PromptCacheConfig | None = Field(
        default=None, description="this model's prompt cache, when it differs from its provider's"
    )


class GatewayConfig(_Strict):
    providers: dict[str, ProviderConfig]
    models: dict[str, ModelConfig]
    tenants: dict[str, TenantConfig] = Field(default_factory=dict)
    policies: PoliciesConfig | None = None
    sampling: SamplingConfig = SamplingConfig()
    limits: Limits = Limits()
    ledger: LedgerConfig = LedgerConfig()
    counting: CountingConfig = CountingConfig()
    passthrough: tuple[PassthroughRoute, ...] = Field(
        default=(), description="other /v1/* paths forwarded as they are; none by default"
    )
    experiments: dict[str, ExperimentConfig] = Field(
        default_factory=dict, description="shadow and split experiments (gateway.experiments)"
    )
    alerts: AlertsConfig = AlertsConfig()
    telemetry: TelemetryConfig = Field(
        default=TelemetryConfig(), description="OpenTelemetry traces over OTLP/HTTP; off by default"
    )
    keys: KeysConfig = Field(
        default=KeysConfig(), description="API keys managed by the admin API and the CLI (off by default)"
    )

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
    for index, route in enumerate(config.passthrough):
        problems.extend(_passthrough_problems(config, index, route))
    for name, experiment in config.experiments.items():
        problems.extend(_experiment_problems(config, name, experiment))
    seen: dict[str, str] = {}
    for tenant_name, tenant in config.tenants.items():
        if not tenant.keys and not config.keys.managed:
            problems.append(
                (("tenants", tenant_name, "keys"), "a tenant needs a key, unless keys.managed is true")
            )
        problems.extend(_rate_limit_problems(config, tenant_name, tenant))
        for index, key in enumerate(tenant.keys):
            digest = key_digest(key_text(key))
            if digest is None:
                continue
            owner = seen.setdefault(digest, tenant_name)
            if owner != tenant_name:
                problems.append(
                    (("tenants", tenant_name, "keys", index), f"a key is shared with tenant {owner!r}")
                )
    return problems


def _rate_limit_problems(config: GatewayConfig, name: str, tenant: TenantConfig) -> list[tuple[Loc, str]]:
    """Models limited by a tenant's or a key's ``rate_limits`` that the config does not serve."""
    limited: list[tuple[Loc, RateLimitsConfig | None]] = [(("tenants", name), tenant.rate_limits)]
    limited.extend(
        (("tenants", name, "keys", index), key.rate_limits)
        for index, key in enumerate(tenant.keys)
        if isinstance(key, TenantKey)
    )
    return [
        ((*where, "rate_limits", "models", model), f"unknown model {model!r}")
        for where, limits in limited
        if limits is not None
        for model in limits.models
        if model not in config.models
    ]


def _passthrough_problems(
    config: GatewayConfig, index: int, route: PassthroughRoute
) -> list[tuple[Loc, str]]:
    where: Loc = ("passthrough", index)
    problems: list[tuple[Loc, str]] = []
    if route.provider is not None and route.provider not in config.providers:
        problems.append(((*where, "provider"), f"unknown provider {route.provider!r}"))
    for number, tenant in enumerate(route.tenants or ()):
        if tenant not in config.tenants:
            problems.append(((*where, "tenants", number), f"unknown tenant {tenant!r}"))
    if route.shared_objects and route.tenants is None:
        first = route.path.strip("/").split("/")[0]
        reach = (
            f"{route.path} matches any first path segment, /files and /batches among them, so it"
            if first in ("*", "**")
            else route.path
        )
        problems.append(
            (
                (*where, "tenants"),
                f"{reach} reaches objects every tenant of the provider's account shares: "
                "name the tenants granted them (or list narrower paths)",
            )
        )
    return problems


_EXPERIMENT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def _experiment_problems(
    config: GatewayConfig, name: str, experiment: ExperimentConfig
) -> list[tuple[Loc, str]]:
    where: Loc = ("experiments", name)
    problems: list[tuple[Loc, str]] = []
    if not _EXPERIMENT_NAME.fullmatch(name):
        problems.append((where, "an experiment's name is 1-64 letters, digits, '.', '_' or '-'"))

    def chat_model(loc: Loc, model: str) -> None:
        found = config.models.get(model)
        if found is None:
            problems.append((loc, f"unknown model {model!r}"))
        elif found.kind != "chat":
            problems.append((loc, f"{model!r} is an embedding model, not a chat model"))

    for index, model in enumerate(experiment.primary):
        chat_model((*where, "primary", index), model)
    chat_model((*where, "candidate"), experiment.candidate)
    if experiment.judge is not None:
        chat_model((*where, "judge", "model"), experiment.judge.model)
    if experiment.embedding_model is not None:
        found = config.models.get(experiment.embedding_model)
        if found is None or found.kind != "embedding":
            problems.append(
                (
                    (*where, "embedding_model"),
                    f"{experiment.embedding_model!r} is not a configured embedding model",
                )
            )
    for field in ("tenants", "exclude_tenants"):
        for index, tenant in enumerate(getattr(experiment.match, field)):
            if tenant not in config.tenants:
                problems.append(((*where, "match", field, index), f"unknown tenant {tenant!r}"))
    return problems


def prompt_cache_of(config: GatewayConfig, model: str) -> PromptCacheConfig:
    """The prompt cache of ``model``: its own, else its provider's, else OpenAI's defaults."""
    found = config.models.get(model)
    if found is None:
        return PromptCacheConfig()
    if found.prompt_cache is not None:
        return found.prompt_cache
    provider = config.providers.get(found.provider)
    return provider.prompt_cache if provider is not None else PromptCacheConfig()
