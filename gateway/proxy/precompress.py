"""Pre-compression: the summary the next turns will need, built after a response, off the request's path.

Its cheap calls are a side record of their own (``<id>:precompress``, parent the request), priced in the
ledger when they end, and what they spent counts against the conversation's cap
(``compress.precompress_max_usd``), failed or not.
"""

from __future__ import annotations

from collections.abc import Callable

from gateway.base.background import Background
from gateway.base.record import Observer, RequestRecord, notify
from gateway.config.runtime import Runtime
from gateway.conversations.notes import LOOKED
from gateway.conversations.store import ConversationStore
from gateway.core.metering import side_calls_nanos
from gateway.core.planning import Plan
from gateway.core.transforms import CompressorTransforms


def precompress_after(
    runtime: Runtime,
    record: RequestRecord,
    plan: Plan,
    *,
    transforms_for: Callable[[RequestRecord], CompressorTransforms],
    conversations: ConversationStore,
    background: Background,
    observers: tuple[Observer, ...],
) -> None:
    """Start pre-compression in the background when ``plan``'s decision asks for it."""
    decision = plan.decision
    if decision is None or not decision.precompress or record.tenant is None:
        return
    side = RequestRecord(
        request_id=f"{record.request_id}:precompress",
        endpoint="precompress",
        tenant=record.tenant,
        parent_id=record.request_id,
    )
    side.requested_model = record.requested_model
    transforms = transforms_for(side)
    tenant, looked = record.tenant.name, record.note(LOOKED)

    async def precompress() -> None:
        try:
            await transforms.precompute(plan.messages(), decision, tenant)
        finally:  # what it spent counts against the conversation's cap, failed or not
            spent = side_calls_nanos(runtime.config, side)
            if spent and looked is not None:
                await conversations.add_precompressed(tenant, looked.anchor, spent)

    background.spawn(
        precompress(),
        name="precompress",
        then=lambda: notify(observers, side) if side.side_calls else None,
    )
