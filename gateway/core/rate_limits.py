"""Step 5, admit, first half: the caller's rate limits (``gateway.ratelimits``), before its budget hold.

Only a request whose tenant or key has rate limits reaches here (the pipeline asks ``runtime.rate_limits``
first, an empty dict for a config without any). It holds one request, its input tokens as counted plus its
output cap, and the most it can cost, against every limit that applies (``limits_for``: its tenant's, its
key's, and theirs for the model it asks for). What its limits have left goes on the record (its answer's
headers) and on ``request.state.headroom`` (an error's answer: ``gateway.edge.routes``,
``gateway.fronts.messages.errors``), a refusal's included. A trusted probe (billed to the ``probe`` tenant,
``gateway.sampling.decide.trusted_probe``) is not the tenant's traffic and is not counted.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from starlette.requests import Request

from gateway.base.errors import RateLimited
from gateway.base.record import RequestRecord
from gateway.config.rate_limits import Scoped, fails_open, limits_for
from gateway.config.runtime import Runtime
from gateway.core.body import headers_of
from gateway.ratelimits.limiter import RATE_HOLD, Demand, RateLimiter
from gateway.sampling.decide import trusted_probe

UNENFORCED = "rate limits not enforced: Redis is unreachable"


async def admit(
    limiter: RateLimiter,
    runtime: Runtime,
    request: Request,
    record: RequestRecord,
    tokens: int,
    caps: Mapping[str, Any],
    max_cost_nanos: Callable[[], int],
    *,
    output: bool = True,
    key_limits: Scoped | None = None,
) -> Callable[[], int]:
    """Hold the request on its rate limits; raises ``RateLimited`` (429) or ``ServiceUnavailable`` (503).
    Returns ``max_cost_nanos``, computed once when a dollar limit needed it, for the budget's hold.
    ``output=False``: a call that produces no tokens (embeddings); ``key_limits``: a managed key's own
    (``gateway.keys``), which the config's book does not hold."""
    assert record.tenant is not None and record.requested_model is not None
    tenant = record.tenant.name
    opens = False
    if key_limits is not None and tenant not in runtime.rate_limits:  # the tenant's choice, from its config
        config = runtime.config.tenants.get(tenant)
        opens = config is not None and fails_open(config)
    applicable = limits_for(
        runtime.rate_limits,
        tenant,
        record.tenant.key_id,
        record.requested_model,
        managed=key_limits,
        fails_open=opens,
    )
    if applicable is None or trusted_probe(
        headers_of(request), tenant=record.tenant.name, config=runtime.config.sampling
    ):
        return max_cost_nanos
    sets = [limits for _, limits in applicable.sets]
    held_tokens = 0
    if any(limits.tokens is not None for limits in sets):
        held_tokens = tokens
        if output:
            held_tokens += held_output_tokens(caps, runtime.config.limits.held_output_tokens)
    nanos = max_cost_nanos() if any(limits.nanos is not None for limits in sets) else None
    try:
        hold = await limiter.admit(applicable, Demand(tokens=held_tokens, nanos=nanos or 0))
    except RateLimited as exc:
        request.state.headroom = record.headroom = exc.headroom
        raise
    request.state.headroom = record.headroom = hold.headroom
    record.put(RATE_HOLD, hold)
    if not hold.enforced:
        record.warnings = (*record.warnings, UNENFORCED)
    return max_cost_nanos if nanos is None else lambda: nanos


def held_output_tokens(caps: Mapping[str, Any], default: int) -> int:
    """The output a request may produce: its cap (``max_completion_tokens``, ``max_tokens``: a chat body's
    names, ``Front.caps``), else ``default``, for each of its ``n`` choices."""
    cap = _positive_int(caps.get("max_completion_tokens")) or _positive_int(caps.get("max_tokens"))
    return (cap or default) * (_positive_int(caps.get("n")) or 1)


def _positive_int(value: object) -> int | None:
    return value if type(value) is int and value > 0 else None
