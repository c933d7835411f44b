"""Where calls about a stored response go (retrieve, cancel, delete, settling a background one): the
model and provider that made it, as the gateway remembered them."""

from __future__ import annotations

from gateway.base.errors import RouteNotFound
from gateway.config.runtime import Route, Runtime
from gateway.fronts.responses.memory import Remembered


def route_for_id(runtime: Runtime, remembered: Remembered | None) -> Route:
    """The model that made the response, else one of its provider's, else the first provider's."""
    if remembered is not None:
        known = runtime.routes.get(remembered.model)
        if known is not None and known[0].provider_name == remembered.provider:
            return known[0]
    providers = list(runtime.config.providers)
    wanted = remembered.provider if remembered is not None and remembered.provider in providers else None
    for provider in (wanted, *providers):
        for routes in runtime.routes.values():
            if routes[0].provider_name == provider:
                return routes[0]
    raise RouteNotFound("No provider is configured to answer calls about responses.")
