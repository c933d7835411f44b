"""The provider's own count of a Responses prompt (``POST /responses/input_tokens``), for a count near a line.

The gateway's count is exact for text, but images, tool definitions and the provider's own framing leave
room for a small difference; a prompt that close to the warning line or the cliff is worth one extra,
unbilled call to the provider that will bill it. The count covers what the provider stores too
(``previous_response_id``), which the gateway can only estimate. Offered by a provider that sets
``responses_input_tokens: true``; never required: any failure or a slow answer
(``input_tokens_timeout``) leaves the gateway's own count in charge.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from gateway.config.runtime import Route
from gateway.upstream.clients import UpstreamPool
from gateway.upstream.provider_count import Confirm
from gateway.upstream.provider_count import provider_count as ask

COUNTED_FIELDS = (
    "input",
    "instructions",
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "previous_response_id",
    "conversation",
    "reasoning",
    "text",
    "truncation",
)
"""What the count endpoint takes of a create body; the rest (stream, store, metadata...) it refuses."""


def counting_body(body: Mapping[str, Any], upstream_model: str) -> bytes:
    counted = {name: body[name] for name in COUNTED_FIELDS if body.get(name) is not None}
    return orjson.dumps({"model": upstream_model, **counted})


async def provider_count(
    pool: UpstreamPool, route: Route, body: Mapping[str, Any], headers: Mapping[str, str]
) -> int | None:
    """The provider's count of ``body`` as it would send it to ``route``; None when it has none to give."""
    content = counting_body(body, route.upstream_model)
    return await ask(
        pool, route, path="/responses/input_tokens", content=content, headers=headers, event="input_tokens"
    )


def confirmer(
    pool: UpstreamPool, route: Route, body: Mapping[str, Any], headers: Mapping[str, str]
) -> Confirm | None:
    """What asks ``route``'s provider for the count of ``body``; None when that provider offers none."""
    if not route.provider.responses_input_tokens:
        return None

    async def confirm() -> int | None:
        return await provider_count(pool, route, body, headers)

    return confirm
