"""Passthrough: the ``/v1/*`` paths the gateway does not serve itself, forwarded only when ops listed them.

Nothing is forwarded by default. Each entry of the config's ``passthrough`` list names a path pattern
(``*`` one segment, a final ``/**`` any number), its methods, and optionally its provider, the tenants it
is granted to (required for the provider's shared objects: files, batches, vector stores, ...), a budget
hold per call and a price per call. The path a request names has been checked at the edge
(``gateway.edge.paths``: no dot segments, no encoded separators), so the path matched here is the path sent.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from gateway.base.echo import echoed
from gateway.base.errors import PermissionDenied, RouteNotFound
from gateway.config.schema.root import PassthroughRoute


class Routed(Protocol):
    """A route to a model (``gateway.config.runtime.Route``): all a passthrough call needs is its provider."""

    @property
    def provider_name(self) -> str: ...


R = TypeVar("R", bound=Routed)


@dataclass(frozen=True, slots=True)
class Grant:
    """The entry that lets ``tenant`` call ``method path``."""

    route: PassthroughRoute
    index: int


def _matches(pattern: Sequence[str], segments: Sequence[str]) -> bool:
    if pattern and pattern[-1] == "**":
        head = pattern[:-1]
        return len(segments) >= len(head) and _matches(head, segments[: len(head)])
    if len(pattern) != len(segments):
        return False
    return all(want in ("*", got) for want, got in zip(pattern, segments, strict=True))


class PassthroughRules:
    """The config's passthrough list, ready to match (built once per config)."""

    def __init__(self, routes: Sequence[PassthroughRoute]) -> None:
        self._routes = [(route, route.path.strip("/").split("/")) for route in routes]

    def __bool__(self) -> bool:
        return bool(self._routes)

    def find(self, method: str, path: str, tenant: str) -> tuple[Grant | None, bool]:
        """The first entry matching ``method path`` that ``tenant`` may use, and whether any entry matched
        the path at all (so that a refusal can say "not granted" rather than "unknown")."""
        segments = path.strip("/").split("/")
        listed = False
        for index, (route, pattern) in enumerate(self._routes):
            if method not in route.methods or not _matches(pattern, segments):
                continue
            listed = True
            if route.tenants is None or tenant in route.tenants:
                return Grant(route, index), True
        return None, listed

    def grants_objects(self, tenant: str, kind: str) -> bool:
        """Whether ``tenant`` was granted any route to the provider's ``kind`` objects (``/files``,
        ``/conversations``, ...), by name or by a wildcard first segment."""
        return any(
            pattern[0] in (kind, "*", "**") and (route.tenants is None or tenant in route.tenants)
            for route, pattern in self._routes
        )


def passthrough_grant(rules: PassthroughRules, method: str, path: str, tenant: str) -> Grant:
    """The entry that lets ``tenant`` call ``method /v1/path``; 404 when none lists it, 403 when the
    entries that list it are granted to other tenants."""
    grant, listed = rules.find(method, path, tenant)
    if grant is not None:
        return grant
    if listed:
        raise PermissionDenied(
            f"{method} /v1/{echoed(path)} is not granted to this tenant.", code="passthrough_not_granted"
        )
    raise RouteNotFound(
        f"Unknown request URL: {method} /v1/{echoed(path)}. The gateway does not serve it, and its "
        "passthrough list does not name it."
    )


def passthrough_route(
    routes_of: Mapping[str, Sequence[R]], grant: Grant, body: Mapping[str, Any] | None
) -> R:
    """Where the call goes (``routes_of``: each model's routes): the entry's provider, else the provider of
    the JSON body's ``model``."""
    provider = grant.route.provider
    model = body.get("model") if body is not None else None
    if isinstance(model, str) and model in routes_of:
        route = routes_of[model][0]
        if provider is None or route.provider_name == provider:
            return route
    if provider is not None:
        for routes in routes_of.values():
            if routes[0].provider_name == provider:
                return routes[0]
    raise RouteNotFound(
        f"The gateway cannot route {grant.route.path}: name a configured model in the JSON body's "
        "`model`, or give its passthrough entry a provider."
    )
