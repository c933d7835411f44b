"""What a traced request notes on its record while it runs: the client's W3C trace context and the
sampling parameters its body asked for. Only for a traced request (the caller checks); no opentelemetry.

Never any text of the request: only the two trace headers and numbers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gateway.base.record import RequestRecord

TRACE_HEADERS = ("traceparent", "tracestate")
MAX_TOKENS_FIELDS = ("max_completion_tokens", "max_tokens", "max_output_tokens")
"""Where each API puts its output cap: chat (and its older name), Messages, Responses."""
NUMBERS = (("temperature", "gen_ai.request.temperature"), ("top_p", "gen_ai.request.top_p"))


def begin_trace(record: RequestRecord, headers: Mapping[str, str]) -> None:
    """Mark ``record`` as traced: its attempts are logged from now on, and its parent is the client's
    span when the client sent one."""
    record.attempt_log = []
    record.trace_context = {name: headers[name] for name in TRACE_HEADERS if name in headers}


def note_parameters(record: RequestRecord, body: Mapping[str, Any]) -> None:
    """The request's output cap, temperature and top_p, when its body set them (numbers only)."""
    found: dict[str, int | float] = {}
    for field in MAX_TOKENS_FIELDS:
        value = body.get(field)
        if type(value) is int:
            found["gen_ai.request.max_tokens"] = value
            break
    for field, name in NUMBERS:
        value = body.get(field)
        if type(value) is int or type(value) is float:
            found[name] = value
    record.span_attributes = found
