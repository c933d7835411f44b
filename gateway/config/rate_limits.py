"""Which rate limits apply to a request: the config's ``rate_limits`` blocks, read once per config into a
book by tenant, and ``limits_for(book, tenant, key_id, model)``, the one place that answers it.

A request counts against every limit set that covers it, each on its own: its tenant's, its tenant's for the
model it asks for, its key's, and its key's for that model. A ``LimitSet`` is a plain value, not the YAML
block, so that keys kept elsewhere than the config (managed through an API) can carry the same limits:
``scoped_of`` turns a ``rate_limits`` block into what the book holds for a tenant or a key.

Only tenants with some limit are in the book: for every other request the question costs one dict lookup.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from gateway.config.auth import KEY_ID_LENGTH
from gateway.config.schema.rate_limits import PerMinute, RateLimitsConfig
from gateway.config.schema.root import GatewayConfig, TenantConfig


@dataclass(frozen=True, slots=True)
class LimitSet:
    """Limits per minute of one scope; None: that dimension is not limited there."""

    requests: int | None = None
    tokens: int | None = None
    nanos: int | None = None
    """Dollars a minute, in nano-dollars."""


@dataclass(frozen=True, slots=True)
class Scoped:
    """The limits of a tenant or of a key: on all its requests (``own``), and per model by name."""

    own: LimitSet | None = None
    models: Mapping[str, LimitSet] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class TenantLimits:
    tenant: Scoped | None
    keys: Mapping[str, Scoped]
    """By key id (``gateway.base.types.Tenant.key_id``)."""
    fails_open: bool
    """While Redis cannot be asked: let requests through unlimited (True) or refuse them (503)."""


@dataclass(frozen=True, slots=True)
class Applicable:
    """The limit sets one request counts against, each with the name of its scope: ``tenant``,
    ``model:<name>``, ``key:<id>``, ``key:<id>:model:<name>`` (the names of its counters in Redis)."""

    tenant: str
    sets: tuple[tuple[str, LimitSet], ...]
    fails_open: bool


RateBook = Mapping[str, TenantLimits]
"""By tenant name: only the tenants with some rate limit, of theirs or of a key."""


def limits_for(
    book: RateBook,
    tenant: str,
    key_id: str,
    model: str,
    *,
    managed: Scoped | None = None,
    fails_open: bool = False,
) -> Applicable | None:
    """The limits a request of ``tenant``'s key ``key_id`` for ``model`` counts against; None: none.
    ``managed``: the limits of a key kept outside the config (``gateway.keys``), which the book does not
    hold; ``fails_open``: the tenant's choice for them when the book has no entry for the tenant."""
    limits = book.get(tenant)
    if limits is None and managed is None:
        return None
    sets: list[tuple[str, LimitSet]] = []
    if limits is not None and limits.tenant is not None:
        sets.extend(_of(limits.tenant, "", model))
    key = managed if managed is not None else limits.keys.get(key_id) if limits is not None else None
    if key is not None:
        sets.extend(_of(key, f"key:{key_id}", model))
    if not sets:
        return None
    opens = limits.fails_open if limits is not None else fails_open
    return Applicable(tenant=tenant, sets=tuple(sets), fails_open=opens)


def _of(scoped: Scoped, scope: str, model: str) -> list[tuple[str, LimitSet]]:
    found = []
    if scoped.own is not None:
        found.append((scope or "tenant", scoped.own))
    by_model = scoped.models.get(model)
    if by_model is not None:
        found.append((f"{scope}:model:{model}" if scope else f"model:{model}", by_model))
    return found


def rate_book(config: GatewayConfig) -> dict[str, TenantLimits]:
    """The book of a config: every tenant with a rate limit of its own or on one of its keys."""
    book = {}
    for name, tenant in config.tenants.items():
        keys = {digest[:KEY_ID_LENGTH]: scoped_of(limits) for digest, limits in tenant.key_rate_limits()}
        if tenant.rate_limits is None and not keys:
            continue
        own = scoped_of(tenant.rate_limits) if tenant.rate_limits is not None else None
        book[name] = TenantLimits(tenant=own, keys=keys, fails_open=fails_open(tenant))
    return book


def scoped_of(config: RateLimitsConfig) -> Scoped:
    own = config.own()
    return Scoped(
        own=_set(own) if own is not None else None,
        models={name: _set(limits) for name, limits in config.models.items()},
    )


def fails_open(tenant: TenantConfig) -> bool:
    """The tenant's ``rate_limits.on_redis_down``, else its budget's, else closed: its keys' limits
    follow the tenant's choice."""
    chosen = tenant.rate_limits.on_redis_down if tenant.rate_limits is not None else None
    if chosen is None and tenant.budget is not None:
        chosen = tenant.budget.on_redis_down
    return chosen == "open"


def _set(limits: PerMinute) -> LimitSet:
    return LimitSet(
        requests=limits.requests_per_minute, tokens=limits.tokens_per_minute, nanos=limits.nanos_per_minute()
    )
