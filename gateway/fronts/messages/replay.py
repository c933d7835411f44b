"""A shadow call's copy of a Messages request (``experiments.replay.Replay``): without the thinking blocks
only the primary model can verify, and its answer read as an Anthropic message or event stream."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx
import orjson

from gateway.config.runtime import Route
from gateway.core.planning import Plan, planned_body
from gateway.experiments.bounded import drain
from gateway.experiments.replay import Reading
from gateway.fronts.messages.stream import MessagesStreamReader, answer_of, blocks_answer
from gateway.fronts.messages.thinking import for_another_model
from gateway.money.anthropic_usage import usage_from_anthropic


class MessagesReplay:
    def body(self, body: Mapping[str, Any], candidate: str) -> dict[str, Any]:
        copy = {**body, "model": candidate}
        copy.pop("store", None)
        return copy

    def content(self, raw: bytes, plan: Plan, route: Route, *, stream: bool) -> bytes:
        changed, dropped = for_another_model(plan.body, route.upstream_model)
        return orjson.dumps(changed) if dropped else planned_body(raw, plan, route)

    def read(self, data: Mapping[str, Any]) -> Reading:
        usage = data.get("usage")
        return Reading(answer_of(data), usage_from_anthropic(usage) if isinstance(usage, dict) else None)

    async def read_stream(self, response: httpx.Response, *, started: float, limit: int) -> Reading:
        reader = await drain(response, MessagesStreamReader(started=started, collect=True), limit)
        answer = blocks_answer([reader.blocks[index] for index in sorted(reader.blocks)], reader.stop_reason)
        error = reader.error
        return Reading(
            answer,
            usage_from_anthropic(reader.usage) if isinstance(reader.usage, dict) else None,
            reader.first_token_seconds,
            str(error.get("type") or "api_error") if error is not None else None,
        )


MESSAGES_REPLAY = MessagesReplay()
