"""What one loaded config becomes at run time: an immutable snapshot swapped atomically on reload."""

from __future__ import annotations

from dataclasses import dataclass, field

from gateway.base.echo import echoed
from gateway.base.errors import InvalidRequest, ModelNotFound
from gateway.config.auth import KeyRing
from gateway.config.experiments import EMPTY, ExperimentIndex, index_of
from gateway.config.passthrough import PassthroughRules
from gateway.config.rate_limits import RateBook, rate_book
from gateway.config.schema.response_cache import ResponseCacheConfig
from gateway.config.schema.root import GatewayConfig, ModelConfig, ProviderConfig
from gateway.tokens.counter import TokenCounter
from policies import ModelFacts, PolicyEngine, load_default


@dataclass(frozen=True, slots=True)
class Route:
    """One candidate for serving a public model name: where to send it and under which name."""

    public_model: str
    upstream_model: str
    provider_name: str
    provider: ProviderConfig
    model: ModelConfig


@dataclass(frozen=True, slots=True)
class Runtime:
    config: GatewayConfig
    keyring: KeyRing
    routes: dict[str, tuple[Route, ...]]
    """public model name → the model itself, then its fallbacks, in order"""
    engine: PolicyEngine
    counter: TokenCounter
    passthrough: PassthroughRules
    experiments: ExperimentIndex = EMPTY
    response_caches: dict[str, ResponseCacheConfig] = field(default_factory=dict)
    """The tenants with a response cache, by name: empty when none has one, so a request checks no more
    than that (``gateway.responsecache``)."""
    rate_limits: RateBook = field(default_factory=dict)
    """The tenants with rate limits (``gateway.config.rate_limits.limits_for``)."""

    def candidates(self, model: str) -> tuple[Route, ...]:
        routes = self.routes.get(model)
        if routes is None:
            raise ModelNotFound(
                f"The model '{echoed(model)}' does not exist or you do not have access to it.", param="model"
            )
        return routes

    def serving(self, model: str, kind: str) -> tuple[Route, ...]:
        """``candidates``, for an endpoint that serves models of ``kind`` (``chat`` or ``embedding``):
        a model of the other kind is a clear 400 here, never a request the upstream would refuse."""
        routes = self.candidates(model)
        actual = routes[0].model.kind
        if actual != kind:
            endpoint = "/v1/embeddings" if actual == "embedding" else "/v1/chat/completions or /v1/responses"
            raise InvalidRequest(
                f"The model '{model}' is {'an embedding' if actual == 'embedding' else 'a chat'} model, "
                f"not served on this endpoint; send it to {endpoint}.",
                param="model",
                code="model_not_supported",
            )
        return routes


def model_facts(config: GatewayConfig) -> dict[str, ModelFacts]:
    """The limits the policy engine needs, for every chat model."""
    return {
        name: ModelFacts(
            context_window=model.context_window,
            tier_threshold=model.pricing.tiers[0].above_input_tokens
            if model.pricing and model.pricing.tiers
            else None,
            max_output_tokens=model.max_output_tokens,
            input_price=float(model.pricing.input) if model.pricing else None,
            cached_input_price=float(model.pricing.cached_input)
            if model.pricing and model.pricing.cached_input is not None
            else None,
            output_price=float(model.pricing.output) if model.pricing else None,
            tier_input_multiplier=float(model.pricing.tiers[0].input_multiplier)
            if model.pricing and model.pricing.tiers
            else 1.0,
            tier_cached_multiplier=float(model.pricing.tiers[0].cached_input_multiplier)
            if model.pricing and model.pricing.tiers
            else 1.0,
        )
        for name, model in config.models.items()
        if model.kind == "chat"
    }


def build_engine(config: GatewayConfig) -> PolicyEngine:
    """Raises PolicyConfigError when the policies do not fit the models and tenants."""
    return PolicyEngine(
        config.policies or load_default(),
        models=model_facts(config),
        embedding_models=[name for name, model in config.models.items() if model.kind == "embedding"],
        tenants=config.tenants.keys(),
    )


def build_runtime(config: GatewayConfig, *, counter: TokenCounter | None = None) -> Runtime:
    """``counter``: the previous runtime's, whose loaded vocabularies are reused."""

    def route(name: str) -> Route:
        model = config.models[name]
        return Route(
            public_model=name,
            upstream_model=model.upstream_model or name,
            provider_name=model.provider,
            provider=config.providers[model.provider],
            model=model,
        )

    routes = {
        name: (route(name), *(route(fallback) for fallback in model.fallbacks if fallback != name))
        for name, model in config.models.items()
    }
    return Runtime(
        config=config,
        keyring=KeyRing(config.tenants),
        routes=routes,
        engine=build_engine(config),
        counter=counter.with_config(config.counting, config.models)
        if counter is not None
        else TokenCounter.build(config.counting, config.models),
        passthrough=PassthroughRules(config.passthrough),
        experiments=index_of(config),
        response_caches={
            name: tenant.response_cache
            for name, tenant in config.tenants.items()
            if tenant.response_cache is not None
        },
        rate_limits=rate_book(config),
    )
