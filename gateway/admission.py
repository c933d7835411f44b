"""Step 5, admit: hold the request's maximum cost against its tenant's budget before any upstream call.

The hold is settled by the request's own cost event (the ledger applies both in one step) or released
when the request fails before it reaches a model. Requests from a trusted probe are billed to the
``probe`` tenant and take no hold on the caller's budget.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from gateway.ledger import Budgets, Reservation
from gateway.record import RequestRecord
from gateway.runtime import Runtime
from gateway.sampling.config import PROBE_TENANT
from gateway.sampling.decide import trusted_probe


class Hold:
    def __init__(self, budgets: Budgets) -> None:
        self._budgets = budgets
        self._reservation: Reservation | None = None

    async def take(
        self,
        runtime: Runtime,
        record: RequestRecord,
        headers: Mapping[str, str],
        max_cost_nanos: Callable[[], int],
    ) -> None:
        """Raises BudgetExceeded (429) or ServiceUnavailable (503, budget unreadable and failing closed).

        ``max_cost_nanos`` is only computed for a tenant that has a budget."""
        assert record.tenant is not None
        if trusted_probe(headers, tenant=record.tenant.name, config=runtime.config.sampling):
            record.bill_tenant = PROBE_TENANT
            return
        if self._budgets.budget_of(record.tenant.name) is None:
            return
        self._reservation = await self._budgets.reserve(
            record.tenant.name, record.request_id, max_cost_nanos()
        )
        if self._reservation is not None and self._reservation.warning:
            record.warnings = (*record.warnings, self._reservation.warning)

    async def release(self) -> None:
        """The request ends without a cost event of its own: give the held amount back."""
        reservation, self._reservation = self._reservation, None
        await self._budgets.release(reservation)
