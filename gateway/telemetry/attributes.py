"""What a request's spans say, read off its record: the GenAI semantic conventions (``gen_ai.*``), HTTP's
(``http.*``, ``server.*``, ``error.type``) and the gateway's own (``gateway.*``). No opentelemetry here.

Only names, numbers and codes the record holds: never prompt or answer text (the record's ``output_text``
is not read), never keys. Client-chosen names (models) are cut as the log cuts them (``echoed``).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from urllib.parse import urlsplit

from gateway.base.echo import echoed_or_none
from gateway.base.money import NANOS_PER_USD
from gateway.base.record import Attempt, RequestRecord
from gateway.config.schema.root import ProviderConfig

Attributes = dict[str, str | int | float | bool]

ENDPOINTS: dict[str, tuple[str | None, str | None]] = {
    "chat": ("chat", "/v1/chat/completions"),
    "messages": ("chat", "/v1/messages"),
    "responses": ("chat", "/v1/responses"),
    "embeddings": ("embeddings", "/v1/embeddings"),
    "messages_count_tokens": (None, "/v1/messages/count_tokens"),
}
"""An endpoint → its GenAI operation (None: no model generates anything) and its HTTP route."""


def server_span_name(record: RequestRecord) -> str:
    """``POST /v1/chat/completions``, as HTTP servers name their spans; ``gateway <endpoint>`` for the
    others (passthrough, stored responses)."""
    route = ENDPOINTS.get(record.endpoint, (None, None))[1]
    return f"POST {route}" if route is not None else f"gateway {record.endpoint}"


def attempt_span_name(record: RequestRecord, attempt: Attempt) -> str:
    """``chat gpt-4o``, as GenAI clients name theirs: the operation and the model asked of the upstream."""
    operation = ENDPOINTS.get(record.endpoint, (None, None))[0]
    return f"{operation or record.endpoint} {attempt.upstream_model}"


def server_attributes(record: RequestRecord, providers: Mapping[str, ProviderConfig]) -> Attributes:
    """The request's span: what was asked, what answered, what it cost and saved."""
    operation, route = ENDPOINTS.get(record.endpoint, (None, None))
    found: Attributes = {"gateway.request_id": record.request_id, "gateway.endpoint": record.endpoint}
    if route is not None:
        found["http.request.method"] = "POST"
        found["http.route"] = route
    if record.status:
        found["http.response.status_code"] = record.status
    if record.error_type is not None:
        found["error.type"] = record.error_type
    if operation is not None:
        found["gen_ai.operation.name"] = operation
    provider = providers.get(record.provider) if record.provider is not None else None
    if provider is not None:
        found["gen_ai.system"] = found["gen_ai.provider.name"] = provider.kind
    _put(found, "gen_ai.request.model", echoed_or_none(record.requested_model))
    _put(found, "gen_ai.response.model", record.called_model)
    if record.span_attributes:
        found.update(record.span_attributes)
    _usage(found, record)
    _put(found, "gateway.tenant", record.tenant.name if record.tenant is not None else None)
    found["gateway.action"] = record.action
    _put(found, "gateway.band", record.band)
    _put(found, "gateway.policy", record.policy)
    _put(found, "gateway.reason", record.reason)
    _put(found, "gateway.stream", record.stream or None)
    _put(found, "gateway.attempts", record.attempts or None)
    _put(found, "gateway.prompt_tokens", record.prompt_tokens)
    _put(found, "gateway.forwarded_tokens", record.forwarded_tokens)
    if record.cost_nanos is not None:
        found["gateway.cost_usd"] = record.cost_nanos / NANOS_PER_USD
    if record.saving_nanos is not None:
        found["gateway.saving_usd"] = record.saving_nanos / NANOS_PER_USD
    _put(found, "gateway.client_disconnected", record.client_disconnected or None)
    return found


def attempt_attributes(
    record: RequestRecord, attempt: Attempt, number: int, providers: Mapping[str, ProviderConfig]
) -> Attributes:
    """One upstream attempt's span: the model and provider tried, where, and how it ended. The attempt that
    answered carries the request's usage (the others produced none the gateway knows of)."""
    operation = ENDPOINTS.get(record.endpoint, (None, None))[0]
    found: Attributes = {
        "gen_ai.request.model": attempt.upstream_model,
        "gateway.model": attempt.model,
        "gateway.provider": attempt.provider,
        "gateway.attempt": number,
        "gateway.request_id": record.request_id,
    }
    if operation is not None:
        found["gen_ai.operation.name"] = operation
    provider = providers.get(attempt.provider)
    if provider is not None:
        found["gen_ai.system"] = found["gen_ai.provider.name"] = provider.kind
        host, port = _address(provider.base_url)
        _put(found, "server.address", host)
        _put(found, "server.port", port)
    if attempt.status:
        found["http.response.status_code"] = attempt.status
    if attempt.error is not None:
        found["error.type"] = attempt.error
    else:
        found["gen_ai.response.model"] = attempt.upstream_model
        if record.span_attributes:
            found.update(record.span_attributes)
        _usage(found, record)
    return found


def _usage(found: Attributes, record: RequestRecord) -> None:
    usage = record.usage
    if usage is not None:
        found["gen_ai.usage.input_tokens"] = usage.input_tokens
        found["gen_ai.usage.output_tokens"] = usage.output_tokens
        if usage.cached_input_tokens:
            found["gen_ai.usage.cache_read.input_tokens"] = usage.cached_input_tokens


def _put(found: Attributes, name: str, value: str | int | float | bool | None) -> None:
    if value is not None:
        found[name] = value


@functools.lru_cache(maxsize=64)
def _address(base_url: str) -> tuple[str | None, int | None]:
    parts = urlsplit(base_url)
    try:
        port = parts.port
    except ValueError:
        port = None
    if port is None and parts.scheme in ("http", "https"):
        port = 443 if parts.scheme == "https" else 80
    return parts.hostname, port
