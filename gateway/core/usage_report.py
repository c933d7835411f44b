"""What ``usage`` tells the client about its prompt, when the gateway rewrote it.

By default the client sees the provider's usage: the prompt as forwarded (compacted or excerpted), which
is what was billed. A client that manages its own context from that number (Codex compacts itself near
its window) then believes its context small and never compacts. A tenant with
``report_prompt_tokens: received`` instead sees the prompt as it sent it: ``prompt_tokens`` (chat) or
``input_tokens`` (Responses) become the received count, and ``total_tokens`` follows; cached-token
details and the output stay the provider's. Only rewritten requests are touched, in whole answers and in
the usage of streams.
"""

from __future__ import annotations

from typing import Any

import orjson

from gateway.upstream.sse import data_of, with_data


def reported(usage: dict[str, Any], received: int) -> dict[str, Any]:
    """``usage`` (chat or Responses shape) with the prompt as received."""
    key, output = (
        ("prompt_tokens", "completion_tokens")
        if "prompt_tokens" in usage
        else ("input_tokens", "output_tokens")
    )
    changed = {**usage, key: received}
    produced = usage.get(output)
    if "total_tokens" in usage and isinstance(produced, int):
        changed["total_tokens"] = received + produced
    return changed


def rewrite_answer(data: dict[str, Any], received: int) -> bytes | None:
    """A whole answer with the usage as reported; None when it carries none."""
    usage = data.get("usage")
    if not isinstance(usage, dict):
        return None
    return orjson.dumps({**data, "usage": reported(usage, received)})


def rewrite_event(event: bytes, received: int) -> bytes:
    """One SSE event (without its blank line) whose data carries usage (a chat usage chunk, a Responses
    final event), with the usage as reported; any other event unchanged."""
    payload = data_of(event)
    if not payload or payload == b"[DONE]":
        return event
    try:
        data = orjson.loads(payload)
    except orjson.JSONDecodeError:
        return event
    if not isinstance(data, dict):
        return event
    if isinstance(data.get("usage"), dict):
        data = {**data, "usage": reported(data["usage"], received)}
    elif isinstance(data.get("response"), dict) and isinstance(data["response"].get("usage"), dict):
        response = data["response"]
        data = {**data, "response": {**response, "usage": reported(response["usage"], received)}}
    else:
        return event
    return with_data(event, data)
