"""Reading token usage from an upstream answer (Chat Completions and Responses shapes)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gateway.base.types import Usage


def usage_from_openai(usage: Mapping[str, Any] | None) -> Usage | None:
    if not isinstance(usage, Mapping):
        return None
    if "prompt_tokens" in usage or "completion_tokens" in usage:
        input_details = usage.get("prompt_tokens_details") or {}
        output_details = usage.get("completion_tokens_details") or {}
        input_tokens, output_tokens = usage.get("prompt_tokens"), usage.get("completion_tokens")
    else:
        input_details = usage.get("input_tokens_details") or {}
        output_details = usage.get("output_tokens_details") or {}
        input_tokens, output_tokens = usage.get("input_tokens"), usage.get("output_tokens")
    return Usage(
        input_tokens=_int(input_tokens),
        cached_input_tokens=_int(
            input_details.get("cached_tokens") if isinstance(input_details, Mapping) else 0
        ),
        output_tokens=_int(output_tokens),
        reasoning_tokens=_int(
            output_details.get("reasoning_tokens") if isinstance(output_details, Mapping) else 0
        ),
        cache_write_tokens=_int(
            input_details.get("cache_write_tokens") if isinstance(input_details, Mapping) else 0
        ),
    )


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0
