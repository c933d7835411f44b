"""What a shadow experiment keeps of a request: the job the candidate's copy is made from, and each
model's side of a pair as the report reads it (``gateway.experiments.report.records``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gateway.base.types import Tenant
from gateway.config.experiments import Watch
from gateway.core.front import CHAT, Front
from gateway.experiments.replay import Replay

PATHS = {"chat": "/chat/completions", "responses": "/responses", "messages": "/messages"}


@dataclass(slots=True)
class ShadowJob:
    """A sampled request, kept until the primary's answer is over (what the candidate needs of it)."""

    watch: Watch
    request_id: str
    tenant: Tenant
    endpoint: str
    body: dict[str, Any]
    headers: dict[str, str]
    stream: bool
    tokens: int
    replay: Replay
    """How the candidate's copy is sent and its answer read, in the API of the request's front."""
    front: Front = CHAT
    path: str = PATHS["chat"]
    """Upstream, with the client's query string (Messages' ``?beta=true``)."""


@dataclass(slots=True)
class Side:
    """One model's part of a pair, as the report reads it (``gateway.experiments.store``)."""

    model: str
    latency_ms: float | None = None
    ttft_ms: float | None = None
    output_tokens: int | None = None
    finish_reason: str | None = None
    error: str | None = None
    status: int = 0
    cost_nanos: int = 0
    action: str | None = None
    tokens_sent: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "latency_ms": None if self.latency_ms is None else round(self.latency_ms, 2),
            "ttft_ms": None if self.ttft_ms is None else round(self.ttft_ms, 2),
            "output_tokens": self.output_tokens,
            "finish_reason": self.finish_reason,
            "error": self.error,
            "status": self.status,
            "cost_nanos": self.cost_nanos,
            "action": self.action,
            "tokens_sent": self.tokens_sent,
        }
