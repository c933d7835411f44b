"""Which tenant a stored response belongs to: the one whose request created it through the gateway.

The provider keeps every response of the account behind one key, so without this check any tenant could
read, delete or chain onto any other tenant's responses by id. The response memory is keyed by tenant
(``gw:{tenant}:resp:<id>``), so a tenant recalls only its own. An id the gateway never saw this tenant
create — another tenant's, or one made outside the gateway — is answered 404, exactly as an id that does
not exist, unless the tenant is configured with ``allow_unknown_responses`` (then it goes to the provider
as before). The same holds for ``previous_response_id``; and the objects the provider shares across the
account that a body names (a ``conversation``, files, vector stores, a stored prompt, an
``item_reference``: ``gateway.fronts.responses.references``) need the tenant's grant
(``gateway.core.shared_objects``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from gateway.base.errors import InvalidRequest, NotFound
from gateway.config.runtime import Runtime
from gateway.core.shared_objects import check_shared
from gateway.fronts.responses.memory import Remembered, ResponseMemory
from gateway.fronts.responses.references import responses_references

_RESPONSE_ID = re.compile(r"[A-Za-z0-9_\-]{1,256}")


class ResponseNotFound(NotFound):
    default_code = "response_not_found"


async def owned(
    memory: ResponseMemory, runtime: Runtime, tenant: str, response_id: object, *, param: str | None = None
) -> Remembered | None:
    """What the gateway remembers of ``response_id``, created by ``tenant``. None for an id it never saw
    when the tenant may name such ids; raises ``ResponseNotFound`` (404) otherwise."""
    if not isinstance(response_id, str) or not _RESPONSE_ID.fullmatch(response_id):
        if param is not None and not isinstance(response_id, str):
            raise InvalidRequest(f"{param} must be a string.", param=param, code="invalid_type")
        raise _not_found(response_id, param)
    remembered = await memory.recall(tenant, response_id)
    if remembered is not None:
        return remembered
    config = runtime.config.tenants.get(tenant)
    if config is not None and config.allow_unknown_responses:
        return None
    raise _not_found(response_id, param)


async def check_references(
    memory: ResponseMemory, runtime: Runtime, tenant: str, body: Mapping[str, Any]
) -> Remembered | None:
    """A Responses body's references to stored objects: the account's shared objects it names need the
    tenant's grant, and ``previous_response_id`` must be the tenant's own (what is remembered of it is
    returned)."""
    check_shared(runtime, tenant, responses_references(body))
    previous = body.get("previous_response_id")
    if previous is None:
        return None
    return await owned(memory, runtime, tenant, previous, param="previous_response_id")


def _not_found(response_id: object, param: str | None) -> ResponseNotFound:
    shown = response_id if isinstance(response_id, str) and _RESPONSE_ID.fullmatch(response_id) else "…"
    if param == "previous_response_id":
        return ResponseNotFound(f"Previous response with id '{shown}' not found.", param=param)
    return ResponseNotFound(f"No response found with id '{shown}'.", param=param)
