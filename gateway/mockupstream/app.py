"""The mock upstream's routes: the provider APIs the gateway calls, answered from ``answers``.

Any key is accepted (the gateway sends the placeholder the mock's start put in its environment). A body
that is not JSON gets OpenAI's (or, on ``/v1/messages``, Anthropic's) 400, and any other path a 404, so
a misrouted call shows up as the error a provider would give rather than as a hang.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from gateway.mockupstream import answers

Answer = Callable[[Mapping[str, Any]], dict[str, Any]]


def create_mock_app() -> Starlette:
    return Starlette(
        routes=[
            Route("/v1/chat/completions", chat, methods=["POST"]),
            Route("/v1/responses", responses, methods=["POST"]),
            Route("/v1/responses/input_tokens", input_tokens, methods=["POST"]),
            Route("/v1/embeddings", embeddings, methods=["POST"]),
            Route("/v1/messages", messages, methods=["POST"]),
            Route("/v1/messages/count_tokens", count_tokens, methods=["POST"]),
            Route("/v1/models", models, methods=["GET"]),
        ],
        exception_handlers={404: not_found, 405: not_found},
    )


async def chat(request: Request) -> Response:
    body = await _body(request)
    if body is None:
        return _invalid()
    completion = answers.chat_completion(body)
    if body.get("stream"):
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        return _stream(answers.chat_chunks(completion, include_usage=include_usage), done=True)
    return _json(completion)


async def responses(request: Request) -> Response:
    body = await _body(request)
    if body is None:
        return _invalid()
    answer = answers.response(body)
    if body.get("stream"):
        return _stream(answers.response_events(answer), named=True)
    return _json(answer)


async def input_tokens(request: Request) -> Response:
    body = await _body(request)
    if body is None:
        return _invalid()
    tokens = answers.messages_tokens(str(body.get("model")), answers.item_messages(body))
    return _json({"object": "response.input_tokens", "input_tokens": tokens})


async def embeddings(request: Request) -> Response:
    body = await _body(request)
    if body is None:
        return _invalid()
    return _json(answers.embeddings(body))


async def messages(request: Request) -> Response:
    body = await _body(request)
    if body is None:
        return _invalid(anthropic=True)
    answer = answers.message(body)
    if body.get("stream"):
        return _stream(answers.message_events(answer), named=True)
    return _json(answer)


async def count_tokens(request: Request) -> Response:
    body = await _body(request)
    if body is None:
        return _invalid(anthropic=True)
    system, turns = answers.anthropic_messages(body)
    model = str(body.get("model"))
    tokens = answers.messages_tokens(model, [{"role": "system", "content": system}, *turns])
    return _json({"input_tokens": tokens})


async def models(request: Request) -> Response:
    return _json(
        {"object": "list", "data": [{"id": "mock", "object": "model", "created": 0, "owned_by": "mock"}]}
    )


async def not_found(request: Request, exc: Exception) -> Response:
    error = {
        "message": f"the mock upstream has no {request.method} {request.url.path}",
        "type": "invalid_request_error",
    }
    return _json({"error": {**error, "param": None, "code": "unknown_url"}}, status=404)


async def _body(request: Request) -> dict[str, Any] | None:
    try:
        body = orjson.loads(await request.body())
    except orjson.JSONDecodeError:
        return None
    return body if isinstance(body, dict) else None


def _invalid(*, anthropic: bool = False) -> Response:
    message = "the body is not a JSON object"
    if anthropic:
        return _json(
            {"type": "error", "error": {"type": "invalid_request_error", "message": message}}, status=400
        )
    error = {"message": message, "type": "invalid_request_error", "param": None, "code": "invalid_json"}
    return _json({"error": error}, status=400)


def _json(data: object, status: int = 200) -> Response:
    return Response(orjson.dumps(data), status_code=status, media_type="application/json")


def _stream(events: Iterator[dict[str, Any]], *, named: bool = False, done: bool = False) -> Response:
    """Server-sent events: ``event:`` lines for the APIs that name their events (Responses, Messages),
    a closing ``[DONE]`` for chat completions."""

    async def lines() -> AsyncIterator[bytes]:
        for event in events:
            head = b"event: " + str(event["type"]).encode() + b"\n" if named else b""
            yield head + b"data: " + orjson.dumps(event) + b"\n\n"
        if done:
            yield b"data: [DONE]\n\n"

    return StreamingResponse(lines(), media_type="text/event-stream")
