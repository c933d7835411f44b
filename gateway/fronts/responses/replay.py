"""A shadow call's copy of a Responses request (``experiments.replay.Replay``): never stored by the
provider nor run in the background, and its answer read as a Responses object or event stream."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx

from gateway.config.runtime import Route
from gateway.core.planning import Plan, planned_body
from gateway.experiments.bounded import drain
from gateway.experiments.replay import Reading
from gateway.fronts.responses.stream import ResponsesStreamReader, answer_of
from gateway.money.usage import usage_from_openai


class ResponsesReplay:
    def body(self, body: Mapping[str, Any], candidate: str) -> dict[str, Any]:
        copy = {**body, "model": candidate, "store": False}
        copy.pop("background", None)
        return copy

    def content(self, raw: bytes, plan: Plan, route: Route, *, stream: bool) -> bytes:
        return planned_body(raw, plan, route)

    def read(self, data: Mapping[str, Any]) -> Reading:
        usage = data.get("usage")
        return Reading(answer_of(data), usage_from_openai(usage if isinstance(usage, dict) else None))

    async def read_stream(self, response: httpx.Response, *, started: float, limit: int) -> Reading:
        events = await drain(response, ResponsesStreamReader(started=started), limit)
        usage = events.usage
        return Reading(
            answer_of(events.response),
            usage_from_openai(usage if isinstance(usage, dict) else None),
            events.first_token_seconds,
        )


RESPONSES_REPLAY = ResponsesReplay()
