"""What the gateway remembers of one request once it is over, for the log, the ledger and the sampler."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import structlog

from gateway.types import Tenant, Usage

log = structlog.get_logger("gateway.observers")


@dataclass(slots=True)
class RequestRecord:
    request_id: str
    endpoint: str
    started: float = field(default_factory=time.perf_counter)
    started_at: float = field(default_factory=time.time)
    tenant: Tenant | None = None
    requested_model: str | None = None
    called_model: str | None = None
    provider: str | None = None
    action: str = "forward"
    stream: bool = False
    status: int = 0
    error_type: str | None = None
    retries: int = 0
    prompt_tokens: int | None = None
    forwarded_tokens: int | None = None
    usage: Usage | None = None
    finish_reason: str | None = None
    upstream_seconds: float | None = None
    first_token_seconds: float | None = None
    total_seconds: float | None = None
    client_disconnected: bool = False
    output_text_chars: int = 0


Observer = Callable[[RequestRecord], None]
"""Runs after the response is written; must not block. Errors are logged, never returned to the client."""


def notify(observers: tuple[Observer, ...], record: RequestRecord) -> None:
    record.total_seconds = time.perf_counter() - record.started
    for observer in observers:
        try:
            observer(record)
        except Exception:
            log.exception("observer_failed", observer=type(observer).__name__, request_id=record.request_id)
