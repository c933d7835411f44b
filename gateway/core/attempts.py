"""What a request's record keeps of its upstream attempts: how many were made, why they all failed, and
the ones that timed out after going out (the provider may bill them)."""

from __future__ import annotations

from collections.abc import Iterable

from gateway.base.errors import ProviderKeyRefused, UpstreamError, UpstreamExhausted, UpstreamInvalidAnswer
from gateway.base.record import TIMEOUT, RequestRecord, SideCall
from gateway.upstream.calls import TimedOut


def note_upstream_failure(record: RequestRecord, exc: UpstreamError) -> None:
    """The attempts a failed upstream call made and, when all failed (or the provider refused the gateway's
    key), why."""
    if exc.attempts:
        record.attempts = exc.attempts
        record.retries = exc.attempts - 1
    if isinstance(exc, UpstreamExhausted | UpstreamInvalidAnswer | ProviderKeyRefused):
        record.error_detail = exc.message


def note_timeouts(record: RequestRecord, timed_out: Iterable[object]) -> None:
    """Attempts that timed out after their request went out: the provider may bill them, so each is an
    estimated side call of kind ``timeout`` (its input as the request's, no output)."""
    for attempt in timed_out:
        if isinstance(attempt, TimedOut):
            route = attempt.route
            record.side_calls.append(
                SideCall(TIMEOUT, route.public_model, route.provider_name, None, attempt.seconds, 504)
            )
