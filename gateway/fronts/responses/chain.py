"""``previous_response_id``: history stored upstream, which the gateway can estimate but not change.

The size of the chain is estimated from what the gateway remembered of the previous response (its input
and output tokens) plus this request's own input; the policy's bands apply to that estimate. Stored
history cannot be compressed or excerpted, so a decision to transform follows the policy's fallbacks
(``gateway.core.planning``): forward with a warning while the invariant allows, else reject with a message
that says why. A reroute, and any fallback model, must stay with the provider that stores the history.
"""

from __future__ import annotations

from collections.abc import Sequence

from gateway.base.errors import ContextLengthExceeded
from gateway.config.runtime import Route
from gateway.core.planning import StoredHistory
from gateway.fronts.responses.memory import Remembered
from policies.notices import header_value


def stored_history(previous_id: object, remembered: Remembered | None) -> StoredHistory | None:
    """The history a request chained to ``previous_id`` carries (0 tokens when the gateway never saw
    that response); None for a request without ``previous_response_id``."""
    if not isinstance(previous_id, str) or not previous_id:
        return None
    return StoredHistory(tokens=remembered.history_tokens if remembered else 0, reference=previous_id)


@header_value
def chain_notice(stored: StoredHistory, remembered: Remembered | None, total: int, *, confirmed: bool) -> str:
    if confirmed:
        return (
            f"history stored upstream ({stored.reference}): {total} input tokens with this turn, "
            "as the provider counts them; the gateway cannot compress it"
        )
    if remembered is None:
        return (
            f"previous_response_id {stored.reference} is unknown to the gateway: "
            "its stored history is not counted"
        )
    return (
        f"history stored upstream ({stored.reference}): about {total} input tokens with this turn "
        f"({stored.tokens} stored); the gateway cannot compress it"
    )


def route_for_chain(candidates: Sequence[Route], remembered: Remembered | None) -> Route:
    """Where a chained request goes first: a candidate of the provider that stores the history."""
    if remembered is not None:
        for route in candidates:
            if route.provider_name == remembered.provider:
                return route
    return candidates[0]


def with_provider(routes: Sequence[Route], provider: str, reference: str) -> tuple[Route, ...]:
    """The routes of the provider that stores the history; an error when none is left."""
    kept = tuple(route for route in routes if route.provider_name == provider)
    if not kept:
        raise ContextLengthExceeded(
            f"The request cannot go to {routes[0].public_model if routes else 'another model'}: the history "
            f"of {reference} is stored by provider {provider}. Start a new conversation, or send the "
            "history in `input` with `store: false`.",
            param="previous_response_id",
            code="history_elsewhere",
        )
    return kept
