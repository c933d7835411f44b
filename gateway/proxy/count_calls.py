"""What a token counting call (``POST /v1/messages/count_tokens``, ``POST /v1/responses/input_tokens``) goes
through before it is counted: the tenant's limit (429 ``rate_limit_exceeded`` with ``retry-after``, before
the body is read), the body's size cap (413 over ``limits.token_count_max_body_bytes``), and, for a tenant
with a hard budget, a budget that is not spent (429 ``budget_exceeded``): such a tenant could not send the
request it counts for, and its counting still costs the provider's shared quota.
"""

from __future__ import annotations

from collections.abc import Mapping

from starlette.requests import Request

from gateway.base.record import RequestRecord
from gateway.config.runtime import Runtime
from gateway.core import body as bodies
from gateway.core.admission import Hold
from gateway.core.count_limit import CountLimiter


async def admitted_body(
    limiter: CountLimiter, runtime: Runtime, record: RequestRecord, request: Request
) -> bytes:
    """The call's body, once its tenant's limit let it in (the tenant is authenticated)."""
    assert record.tenant is not None
    limits = runtime.config.limits
    tenant = runtime.config.tenants.get(record.tenant.name)
    own = tenant.token_counts_per_minute if tenant is not None else None
    await limiter.admit(record.tenant.name, own or limits.token_counts_per_minute)
    return await bodies.read_body(request, min(limits.token_count_max_body_bytes, limits.max_body_bytes))


async def check_budget_left(
    hold: Hold, runtime: Runtime, record: RequestRecord, headers: Mapping[str, str]
) -> None:
    """429 ``budget_exceeded`` when the tenant's hard budget has nothing left: a hold of one nano-dollar,
    given back at once (no Redis call for a tenant without a budget)."""
    await hold.take(runtime, record, headers, lambda: 1)
    await hold.release()
