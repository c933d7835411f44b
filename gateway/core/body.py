"""The request body: read within the size limit, parse once with orjson, check the fields we rely on.

The gateway does not build a model of the whole request: it checks only what it must read itself
(``model``, ``messages``, ``stream``, ``input``) and forwards the rest untouched.
"""

from __future__ import annotations

from typing import Any

import orjson
from starlette.requests import ClientDisconnect, Request

from gateway.base.errors import ClientClosedRequest, InvalidRequest, MalformedJSON, PayloadTooLarge

JsonObject = dict[str, Any]


def headers_of(request: Request) -> dict[str, str]:
    """The request's headers as a plain dict, decoded once per request (Starlette's ``Headers`` decodes
    and scans its raw list on every lookup, and a request is looked up a dozen times)."""
    scope = request.scope
    headers: dict[str, str] | None = scope.get("gateway.headers")
    if headers is None:  # ASGI's header names are lower-case bytes; Starlette decodes both as latin-1 too
        pairs = scope["headers"]
        headers = {name.decode("latin-1"): value.decode("latin-1") for name, value in pairs}
        scope["gateway.headers"] = headers
    return headers


async def read_body(request: Request, limit: int) -> bytes:
    declared = headers_of(request).get("content-length")
    if declared is not None and declared.isascii() and declared.isdigit() and int(declared) > limit:
        raise _too_large(limit)
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise _too_large(limit)
            chunks.append(chunk)
    except ClientDisconnect as exc:
        raise ClientClosedRequest("The client closed the connection before sending its whole body.") from exc
    return b"".join(chunks)


def _too_large(limit: int) -> PayloadTooLarge:
    return PayloadTooLarge(f"Request body is larger than the gateway's limit of {limit:,} bytes.")


def json_object(content: bytes) -> JsonObject | None:
    """An upstream's answer as a JSON object; None when it is not one (no error: it is passed on as is)."""
    try:
        data = orjson.loads(content)
    except orjson.JSONDecodeError:
        return None
    return data if isinstance(data, dict) else None


MAX_DEPTH = 254
"""The deepest nesting (containers within containers) orjson can write again. The gateway re-serialises
what it changes (a compressed prompt, a model alias, the usage option of a stream) and what it hashes or
counts, so a body nested deeper is refused up front rather than failing half way."""


def parse_object(raw: bytes) -> JsonObject:
    if not raw:
        raise MalformedJSON("The request body is empty; a JSON object was expected.")
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise MalformedJSON(f"The request body is not valid JSON: {exc}.") from exc
    if not isinstance(data, dict):
        raise InvalidRequest(
            f"The request body must be a JSON object, not {_kind(data)}.", code="invalid_type"
        )
    _check_depth(raw, data)
    return data


def _check_depth(raw: bytes, data: JsonObject) -> None:
    """No more brackets than ``MAX_DEPTH`` cannot nest deeper (two C scans of the bytes); otherwise a
    serialisation, which fails exactly where a later one would."""
    if raw.count(b"[") + raw.count(b"{") <= MAX_DEPTH:
        return
    try:
        orjson.dumps(data)
    except orjson.JSONEncodeError as exc:
        raise InvalidRequest(
            f"The request body nests JSON deeper than {MAX_DEPTH} levels, more than the gateway handles.",
            code="nesting_too_deep",
        ) from exc


def require_model(body: JsonObject) -> str:
    model = body.get("model")
    if model is None:
        raise InvalidRequest(
            "you must provide a model parameter", param="model", code="missing_required_parameter"
        )
    if not isinstance(model, str) or not model:
        raise InvalidRequest(
            f"model must be a non-empty string, not {_kind(model)}.", param="model", code="invalid_type"
        )
    return model


def check_chat(body: JsonObject) -> str:
    """Validate a chat completions body; return its model."""
    model = require_model(body)
    messages = body.get("messages")
    if messages is None:
        raise InvalidRequest(
            "Missing required parameter: 'messages'.", param="messages", code="missing_required_parameter"
        )
    if not isinstance(messages, list):
        raise InvalidRequest(
            f"messages must be an array, not {_kind(messages)}.", param="messages", code="invalid_type"
        )
    if not messages:
        raise InvalidRequest(
            "messages must contain at least one message.", param="messages", code="empty_array"
        )
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            raise InvalidRequest(
                f"messages[{index}] must be an object, not {_kind(message)}.",
                param=f"messages[{index}]",
                code="invalid_type",
            )
        if not isinstance(message.get("role"), str):
            raise InvalidRequest(
                f"messages[{index}].role must be a string.",
                param=f"messages[{index}].role",
                code="invalid_type",
            )
    _check_stream_flag(body)
    return model


def check_embeddings(body: JsonObject) -> str:
    model = require_model(body)
    value = body.get("input")
    if value is None:
        raise InvalidRequest(
            "Missing required parameter: 'input'.", param="input", code="missing_required_parameter"
        )
    if not isinstance(value, str | list):
        raise InvalidRequest(
            f"input must be a string or an array, not {_kind(value)}.", param="input", code="invalid_type"
        )
    return model


def _check_stream_flag(body: JsonObject) -> None:
    stream = body.get("stream")
    if stream is not None and not isinstance(stream, bool):
        raise InvalidRequest(
            f"stream must be a boolean, not {_kind(stream)}.", param="stream", code="invalid_type"
        )
    options = body.get("stream_options")
    if options is not None and not isinstance(options, dict):
        raise InvalidRequest("stream_options must be an object.", param="stream_options", code="invalid_type")


def _kind(value: object) -> str:
    return {
        dict: "an object",
        list: "an array",
        str: "a string",
        bool: "a boolean",
        int: "a number",
        float: "a number",
        type(None): "null",
    }.get(type(value), type(value).__name__)
