"""What one loaded config becomes at run time: an immutable snapshot swapped atomically on reload."""

from __future__ import annotations

from dataclasses import dataclass

from gateway.auth import KeyRing
from gateway.config import GatewayConfig, ModelConfig, ProviderConfig
from gateway.errors import ModelNotFound


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

    def candidates(self, model: str) -> tuple[Route, ...]:
        routes = self.routes.get(model)
        if routes is None:
            raise ModelNotFound(
                f"The model '{model}' does not exist or you do not have access to it.", param="model"
            )
        return routes


def build_runtime(config: GatewayConfig) -> Runtime:
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
    return Runtime(config=config, keyring=KeyRing(config.tenants), routes=routes)
