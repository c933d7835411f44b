"""The ops alert: a tenant's recent requests keep landing past a cliff or in the warning band, which says
the policy does not fit the traffic (a warning line too low, a model whose window is too small, a client
that never trims). Counted from the tenant's cost events of the window, read through the ledger reader.
"""

from __future__ import annotations

from collections.abc import AsyncIterable
from dataclasses import dataclass
from decimal import Decimal

from gateway.alerts.alert import Alert, day_end_ms, kept_until
from gateway.config.schema.alerts import PolicyFitConfig
from gateway.ledger.event import CostEvent
from gateway.ledger.period import day_of
from policies import Action
from policies.bands import Band

REQUEST_ACTIONS = frozenset(action.value for action in Action)
ACTED = frozenset({Action.COMPRESS.value, Action.RETRIEVE.value, Action.REROUTE.value})
BANDS_ACTED_ON = frozenset({Band.WARNING.value, Band.OVER_CLIFF.value, Band.OVER_WINDOW.value})


@dataclass(slots=True)
class FitCount:
    requests: int = 0
    over_cliff: int = 0
    """Billed at a price tier above the base (past the cliff)."""
    in_band: int = 0
    """The policy acted on them (compressed, retrieved, rerouted) or the cache kept them whole in the band."""

    def add(self, event: CostEvent) -> None:
        if event.parent_id is not None or event.action not in REQUEST_ACTIONS:
            return  # side calls, shadow calls and requests that failed before a decision
        self.requests += 1
        if event.tier is not None:
            self.over_cliff += 1
        if event.action in ACTED or event.reason is not None or event.band in BANDS_ACTED_ON:
            self.in_band += 1


async def count_window(events: AsyncIterable[CostEvent]) -> FitCount:
    count = FitCount()
    async for event in events:
        count.add(event)
    return count


def fit_alerts(tenant: str, count: FitCount, config: PolicyFitConfig, *, now_ms: int) -> list[Alert]:
    """At most one alert per kind and UTC day."""
    if count.requests < config.min_requests:
        return []
    found = []
    window = f"the last {config.window_minutes} minutes"
    checks = (
        ("over_cliff", count.over_cliff, config.over_cliff_share, "were billed past a price cliff"),
        ("warning_band", count.in_band, config.warning_share, "landed in the warning band or beyond"),
    )
    for name, hits, line, what in checks:
        if Decimal(hits) < line * count.requests:
            continue
        share = hits / count.requests
        found.append(
            Alert(
                kind="policy_fit",
                tenant=tenant,
                period=day_of(now_ms),
                name=name,
                text=(
                    f":mag: Tenant *{tenant}*: {hits} of {count.requests} requests in {window} ({share:.0%}) "
                    f"{what}; the policy may not fit this traffic (see `gateway replay` to try another)."
                ),
                claim_until_ms=kept_until(day_end_ms(now_ms)),
                figures={"requests": count.requests, "hits": hits, "share": round(share, 4)},
            )
        )
    return found
