"""A model's side of a pair as a finished request record tells it, and the name a shadow call goes by."""

from __future__ import annotations

from gateway.base.record import SHADOW_CALL, RequestRecord
from gateway.experiments.job import Side

SHADOW = SHADOW_CALL
"""The endpoint of a shadow call's record and the kind and action of its cost event."""


def side_of(record: RequestRecord) -> Side:
    """The primary's (or a split arm's) side, from its finished record."""
    upstream = record.upstream_seconds
    failed = record.status >= 400 or record.error_type is not None
    return Side(
        model=record.called_model or record.requested_model or "",
        latency_ms=None if upstream is None else upstream * 1000,
        ttft_ms=None if record.first_token_seconds is None else record.first_token_seconds * 1000,
        output_tokens=record.usage.output_tokens if record.usage is not None else None,
        finish_reason=record.finish_reason,
        error=(record.error_type or "upstream_error") if failed else None,
        status=record.status,
        cost_nanos=record.cost_nanos or 0,
        action=record.action,
        tokens_sent=record.forwarded_tokens,
    )
