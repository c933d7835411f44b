"""What a shadow call needs of the front its request came through: the candidate's copy of the body and
its bytes, and how to read the candidate's answer in that front's API, whole or as a stream read up to
``limits.shadow_max_response_bytes``.

Each front hands its own to ``Experiments.watch`` (``gateway.fronts.chat``,
``gateway.fronts.responses.replay``, ``gateway.fronts.messages.replay``), so that experiments know no front.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import httpx

from gateway.base.types import Usage
from gateway.config.runtime import Route
from gateway.core.planning import Plan
from gateway.experiments.answer import Answer


@dataclass(frozen=True, slots=True)
class Reading:
    """What the candidate answered, and what its record keeps of it."""

    answer: Answer
    usage: Usage | None
    first_token_seconds: float | None = None
    error_type: str | None = None
    """The error a stream ended in (Messages' ``error`` event), when it did."""


class Replay(Protocol):
    def body(self, body: Mapping[str, Any], candidate: str) -> dict[str, Any]:
        """The request as the candidate gets it: its model, and nothing the provider would keep or run
        on."""
        ...

    def content(self, raw: bytes, plan: Plan, route: Route, *, stream: bool) -> bytes:
        """The bytes sent to the candidate, once planned for it."""
        ...

    def read(self, data: Mapping[str, Any]) -> Reading:
        """A whole answer's body, parsed."""
        ...

    async def read_stream(self, response: httpx.Response, *, started: float, limit: int) -> Reading:
        """A streamed answer, read to its end or to ``limit`` bytes (``gateway.experiments.bounded``)."""
        ...
