"""The provider's own count of a Messages prompt (``POST /messages/count_tokens``).

Claude's tokenizer is not public: the gateway counts a Messages prompt with the model's configured
encoding, an estimate. Where that estimate decides something (near a line: the policy's
``confirm_within_ratio`` of it, ``policies.margin``), and for a client's own ``count_tokens``, the provider
that will bill the prompt is asked instead, when it offers the count (``messages_count_tokens: true``, a
``kind: anthropic`` provider). It is unbilled, and never required: an error or no answer within
``input_tokens_timeout`` leaves the gateway's estimate in charge, decided at the top of its error band.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from gateway.config.runtime import Route
from gateway.upstream.clients import UpstreamPool
from gateway.upstream.provider_count import Confirm
from gateway.upstream.provider_count import provider_count as ask

COUNTED_FIELDS = ("messages", "system", "tools", "tool_choice", "thinking", "mcp_servers")
"""What the count endpoint takes of a create body; the rest (max_tokens, stream, metadata...) it refuses."""


def counting_body(body: Mapping[str, Any], upstream_model: str) -> bytes:
    counted = {name: body[name] for name in COUNTED_FIELDS if body.get(name) is not None}
    return orjson.dumps({"model": upstream_model, **counted})


def offers_count(route: Route) -> bool:
    provider = route.provider
    return provider.kind == "anthropic" and provider.messages_count_tokens


async def provider_count(
    pool: UpstreamPool, route: Route, body: Mapping[str, Any], headers: Mapping[str, str], *, query: str = ""
) -> int | None:
    """The provider's count of ``body`` as it would be sent to ``route``; None when it has none to give.
    ``query``: the client's query string (``beta=true``), kept."""
    suffix = f"?{query}" if query else ""
    content = counting_body(body, route.upstream_model)
    return await ask(
        pool,
        route,
        path=f"/messages/count_tokens{suffix}",
        content=content,
        headers=headers,
        event="count_tokens",
    )


def confirmer(
    pool: UpstreamPool, route: Route, body: Mapping[str, Any], headers: Mapping[str, str], *, query: str = ""
) -> Confirm | None:
    """What asks ``route``'s provider for the count of ``body``; None when that provider offers none."""
    if not offers_count(route):
        return None

    async def confirm() -> int | None:
        return await provider_count(pool, route, body, headers, query=query)

    return confirm
