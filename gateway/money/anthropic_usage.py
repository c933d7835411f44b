"""Reading Anthropic's usage object into the gateway's ``Usage`` (OpenAI's conventions).

Anthropic reports ``input_tokens`` WITHOUT the tokens read from or written to its prompt cache:
``cache_read_input_tokens`` and ``cache_creation_input_tokens`` come on top, the latter split by TTL in
``cache_creation: {ephemeral_5m_input_tokens, ephemeral_1h_input_tokens}``. The gateway's ``Usage``
counts every prompt token in ``input_tokens`` (OpenAI's way), so:

- ``input_tokens``        = input + cache reads + cache writes
- ``cached_input_tokens`` = cache reads (priced at the model's ``cached_input``, Anthropic's 0.1x)
- ``cache_write_tokens``  = cache writes of either TTL (5 minutes: ``prompt_cache.write_multiplier``,
  1.25x for Anthropic), of which ``cache_write_1h_tokens`` were written for an hour (2x)
- ``output_tokens``       = output (thinking included: Anthropic does not report it apart)

The split by TTL is taken from ``cache_creation`` when present; a write total without it is all
5-minute writes. When the split adds up to more than the total (a provider reporting only the split),
the split wins. Missing, negative or non-integer fields count 0. Server-tool uses (``server_tool_use``:
``web_search_requests``, ``web_fetch_requests``), billed per use, are ``tool_uses``
(``gateway.servertools.reported``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gateway.base.types import Usage
from gateway.servertools.reported import anthropic_uses


def usage_from_anthropic(usage: Mapping[str, Any]) -> Usage:
    """The gateway's ``Usage`` of one Messages answer (see the module docstring)."""
    uncached = _int(usage.get("input_tokens"))
    read = _int(usage.get("cache_read_input_tokens"))
    written = _int(usage.get("cache_creation_input_tokens"))
    split = usage.get("cache_creation")
    five = hour = 0
    if isinstance(split, Mapping):
        five = _int(split.get("ephemeral_5m_input_tokens"))
        hour = _int(split.get("ephemeral_1h_input_tokens"))
    written = max(written, five + hour)
    return Usage(
        input_tokens=uncached + read + written,
        cached_input_tokens=read,
        output_tokens=_int(usage.get("output_tokens")),
        cache_write_tokens=written,
        cache_write_1h_tokens=min(hour, written),
        tool_uses=anthropic_uses(usage),
    )


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0
