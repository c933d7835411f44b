"""A local OpenAI-compatible upstream for end-to-end tests and benchmarks.

Run: ``python -m tests.mock.upstream --port 9000``. It answers chat completions (plain, tool calls,
streaming), Responses (``POST /v1/responses``, plain, function calls, reasoning items with an opaque
``encrypted_content``, streaming in the real event shapes; ``GET``/``DELETE /v1/responses/{id}``,
``/cancel``, ``/input_tokens``, ``/compact``), embeddings, moderations and models, records every request
it receives (a Responses request also with its raw body text), and can be told to misbehave:

- ``POST /_control`` with JSON ``{"fail_next": N, "fail_status": 503, "retry_after": 0, "delay": 0.0,
  "chunk_delay": 0.0, "chunks": 8}``: the next N requests fail with that status; every answer waits
  ``delay`` seconds first; streams send ``chunks`` pieces ``chunk_delay`` apart.
- ``background: true`` responses are answered ``queued`` without usage, then read back (``GET
  /v1/responses/{id}``) ``in_progress`` ``background_polls`` times (``_control``, default 1) before
  ``completed``; ``?stream=true`` streams the whole response's events.
- Prompt caching is simulated (``tests.mock.cache``): usage reports ``cached_tokens`` for the prefix an
  earlier request to the same model left within the retention, in 128-token blocks from 1,024 tokens;
  prompt tokens are counted exactly. ``_control`` takes ``{"cache": false}`` to turn it off and
  ``{"cache_age_seconds": 600}`` to age what is cached (a pause without waiting);
  ``{"cache_retention_seconds": 5}`` shortens the retention (time scaled down: real pauses of seconds
  outlast it; ``/_reset`` restores 300).
- ``_control`` takes ``{"models": {"<model>": {...}}}``: per-model behaviour (``tests.mock.behaviours``:
  slower on long prompts, shorter answers, another tool above a length, failing), merged by model.
- ``GET /_requests``: what it received (path, headers without authorization values, JSON body);
  ``?since=N`` leaves out the first N.
- ``POST /_reset``: forget requests and behaviour.
- Anthropic's ``POST /v1/messages`` and ``/v1/messages/count_tokens``: ``tests.mock.anthropic``.
- ``--agent-project DIR`` (``create_mock_app(agent=...)``): Responses and Messages requests that offer a
  file-reading tool are answered by a scripted agent that reads DIR's files, several calls a turn
  (``--agent-calls``), then answers (``tests.mock.agent``); off by default.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import orjson
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from tests.mock.agent import AgentScript
from tests.mock.anthropic import messages_routes
from tests.mock.behaviours import ModelBehaviour
from tests.mock.cache import PromptCache
from tests.mock.responses import response_events, responses_answer
from tests.mock.summary import SUMMARY


@dataclass
class Behaviour:
    fail_next: int = 0
    fail_status: int = 503
    retry_after: float | None = None
    delay: float = 0.0
    chunk_delay: float = 0.0
    chunks: int = 8
    record_bodies: bool = True
    background_polls: int = 1


@dataclass
class MockState:
    behaviour: Behaviour = field(default_factory=Behaviour)
    requests: list[dict[str, Any]] = field(default_factory=list)
    streams_cancelled: int = 0
    streams_finished: int = 0
    responses: dict[str, dict[str, Any]] = field(default_factory=dict)
    cache: PromptCache = field(default_factory=PromptCache)
    running: dict[str, int] = field(default_factory=dict)
    """Background responses still running: how many more reads see them in progress."""
    models: dict[str, ModelBehaviour] = field(default_factory=dict)
    """Per-model behaviour (``_control``'s ``models``), by the model the request names."""
    agent: AgentScript | None = None
    """The scripted agent that answers requests offering its tools (``tests.mock.agent``); None: off."""


def _json(data: object, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(orjson.dumps(data), status_code=status, media_type="application/json", headers=headers)


def _prompt_tokens(body: dict[str, Any]) -> int:
    return max(1, len(orjson.dumps(body.get("messages") or body.get("input") or "")) // 4)


def _last_message(body: dict[str, Any]) -> dict[str, Any]:
    messages = body.get("messages") or [{}]
    return messages[-1] if isinstance(messages[-1], dict) else {}


def _text_of(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""


def _is_summary_request(body: dict[str, Any]) -> bool:
    """The gateway's cheap-model call: its system prompt asks for the three summary sections."""
    messages = body.get("messages") or []
    return any(
        isinstance(m, dict) and m.get("role") == "system" and "User goal" in str(m.get("content", ""))
        for m in messages
    )


def _answer(body: dict[str, Any]) -> tuple[str | None, list[dict[str, Any]] | None, str]:
    """The reply: (content, tool_calls, finish_reason)."""
    if _is_summary_request(body):
        return SUMMARY, None, "stop"
    last = _last_message(body)
    tools = body.get("tools") or []
    if tools and last.get("role") == "user":
        name = tools[0].get("function", {}).get("name", "tool")
        call = {
            "id": "call_mock_1",
            "type": "function",
            "function": {"name": name, "arguments": '{"city": "Paris"}'},
        }
        return None, [call], "tool_calls"
    if last.get("role") == "tool":
        return f"The tool said: {_text_of(last)[:80]}", None, "stop"
    return f"echo: {_text_of(last)[:80]}", None, "stop"


def create_mock_app(agent: AgentScript | None = None) -> Starlette:
    state = MockState(agent=agent)

    async def misbehave(request: Request, body: dict[str, Any], raw: bytes | None = None) -> Response | None:
        if state.behaviour.record_bodies:
            headers = {k: ("<set>" if k == "authorization" else v) for k, v in request.headers.items()}
            seen: dict[str, Any] = {"path": request.url.path, "headers": headers, "body": body}
            if raw is not None:
                seen["raw"] = raw.decode()
                seen["query"] = request.url.query
            state.requests.append(seen)
        if state.behaviour.delay:
            await asyncio.sleep(state.behaviour.delay)
        if state.behaviour.fail_next > 0:
            state.behaviour.fail_next -= 1
            headers = {}
            if state.behaviour.retry_after is not None:
                headers["retry-after"] = str(state.behaviour.retry_after)
            error = {
                "error": {"message": "mock failure", "type": "server_error", "param": None, "code": None}
            }
            return _json(error, state.behaviour.fail_status, headers)
        return None

    async def as_model(
        body: dict[str, Any], prompt_tokens: int
    ) -> tuple[ModelBehaviour | None, Response | None]:
        """The request's model's own behaviour (after its delay), or the failure it answers with."""
        behaviour = state.models.get(str(body.get("model")))
        if behaviour is None:
            return None, None
        if behaviour.delay_per_1k_prompt_tokens:
            await asyncio.sleep(behaviour.delay(prompt_tokens))
        if behaviour.fail_status is not None:
            error = {"message": "mock model failure", "type": "server_error", "param": None, "code": None}
            return behaviour, _json({"error": error}, behaviour.fail_status)
        if behaviour.too_long(prompt_tokens):
            message = (
                f"This model's maximum context length is {behaviour.context_window} tokens. However, your "
                f"messages resulted in {prompt_tokens} tokens. Please reduce the length of the messages."
            )
            error = {
                "message": message,
                "type": "invalid_request_error",
                "param": "messages",
                "code": "context_length_exceeded",
            }
            return behaviour, _json({"error": error}, 400)
        return behaviour, None

    async def chat(request: Request) -> Response:
        body = orjson.loads(await request.body())
        failure = await misbehave(request, body)
        if failure is not None:
            return failure
        prompt, cached = state.cache.chat(body)
        behaviour, failure = await as_model(body, prompt)
        if failure is not None:
            return failure
        content, tool_calls, finish = _answer(body)
        if behaviour is not None:
            content, tool_calls = behaviour.chat(content, tool_calls, prompt)
        cap = body.get("max_completion_tokens") or body.get("max_tokens")
        if content and isinstance(cap, int) and len(content) // 4 > cap:
            content, finish = content[: 4 * cap], "length"  # an answer never runs past its cap
        completion = max(1, len(content or "") // 4) if content else 12
        usage = {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": cached},
            "completion_tokens_details": {"reasoning_tokens": 0},
        }
        created = int(time.time())
        if body.get("stream"):
            return StreamingResponse(
                _stream(body, content, tool_calls, finish, usage, created), media_type="text/event-stream"
            )
        message: dict[str, Any] = {"role": "assistant", "content": content, "refusal": None}
        if tool_calls:
            message["tool_calls"] = tool_calls
        return _json(
            {
                "id": "chatcmpl-mock",
                "object": "chat.completion",
                "created": created,
                "model": body.get("model"),
                "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish}],
                "usage": usage,
            },
            headers={
                "x-request-id": "mock-req-1",
                "openai-processing-ms": "1",
                "set-cookie": "lb=mock; Path=/",
            },
        )

    async def _stream(
        body: dict[str, Any],
        content: str | None,
        tool_calls: list[dict[str, Any]] | None,
        finish: str,
        usage: dict[str, Any],
        created: int,
    ) -> AsyncIterator[bytes]:
        base = {
            "id": "chatcmpl-mock",
            "object": "chat.completion.chunk",
            "created": created,
            "model": body.get("model"),
        }
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))

        def event(choices: list[dict[str, Any]], extra: dict[str, Any] | None = None) -> bytes:
            chunk = {
                **base,
                "choices": choices,
                **({"usage": None} if include_usage else {}),
                **(extra or {}),
            }
            return b"data: " + orjson.dumps(chunk) + b"\n\n"

        try:
            yield event([{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}])
            if tool_calls:
                delta = {"tool_calls": [{"index": 0, **tool_calls[0]}]}
                yield event([{"index": 0, "delta": delta, "finish_reason": None}])
            else:
                text = content or ""
                pieces = max(1, state.behaviour.chunks)
                size = max(1, -(-len(text) // pieces))
                for start in range(0, len(text), size):
                    if state.behaviour.chunk_delay:
                        await asyncio.sleep(state.behaviour.chunk_delay)
                    yield event(
                        [
                            {
                                "index": 0,
                                "delta": {"content": text[start : start + size]},
                                "finish_reason": None,
                            }
                        ]
                    )
            yield event([{"index": 0, "delta": {}, "finish_reason": finish}])
            if include_usage:
                yield b"data: " + orjson.dumps({**base, "choices": [], "usage": usage}) + b"\n\n"
            yield b"data: [DONE]\n\n"
            state.streams_finished += 1
        except asyncio.CancelledError:
            state.streams_cancelled += 1
            raise

    async def responses(request: Request) -> Response:
        raw = await request.body()
        body = orjson.loads(raw)
        failure = await misbehave(request, body, raw)
        if failure is not None:
            return failure
        usage = state.cache.responses(body)
        behaviour, failure = await as_model(body, usage[0])
        if failure is not None:
            return failure
        response = responses_answer(body, number=len(state.responses) + 1, usage=usage)
        if behaviour is not None:
            response = behaviour.response(response, usage[0])
        if state.agent is not None:
            response = state.agent.respond(body, response)
        if body.get("store") is not False:
            state.responses[response["id"]] = response
        if body.get("background"):
            response["background"] = True
            state.running[response["id"]] = state.behaviour.background_polls
            if not body.get("stream"):
                return _json({**response, "status": "queued", "output": [], "usage": None})
        if body.get("stream"):
            return StreamingResponse(_response_events(response), media_type="text/event-stream")
        return _json(response, headers={"x-request-id": "mock-req-2"})

    async def _response_events(response: dict[str, Any]) -> AsyncIterator[bytes]:
        try:
            for event in response_events(response, pieces=max(1, state.behaviour.chunks)):
                if state.behaviour.chunk_delay:
                    await asyncio.sleep(state.behaviour.chunk_delay)
                yield b"event: " + event["type"].encode() + b"\ndata: " + orjson.dumps(event) + b"\n\n"
            state.streams_finished += 1
        except asyncio.CancelledError:
            state.streams_cancelled += 1
            raise

    async def response_by_id(request: Request) -> Response:
        raw = await request.body()
        failure = await misbehave(request, orjson.loads(raw) if raw else {}, raw)
        if failure is not None:
            return failure
        response_id = request.path_params["response_id"]
        found = state.responses.get(response_id)
        if found is None:
            error = {
                "message": f"No response found with id '{response_id}'.",
                "type": "invalid_request_error",
            }
            return _json({"error": {**error, "param": None, "code": None}}, 404)
        action = request.path_params.get("action", "")
        if request.method == "DELETE":
            del state.responses[response_id]
            return _json({"id": response_id, "object": "response.deleted", "deleted": True})
        if action == "cancel":
            state.running.pop(response_id, None)
            return _json({**found, "status": "cancelled"})
        if action == "input_items":
            return _json({"object": "list", "data": [], "has_more": False})
        if request.query_params.get("stream") == "true":
            state.running.pop(response_id, None)
            return StreamingResponse(_response_events(found), media_type="text/event-stream")
        if state.running.get(response_id, 0) > 0:
            state.running[response_id] -= 1
            return _json({**found, "status": "in_progress", "output": [], "usage": None})
        state.running.pop(response_id, None)
        return _json(found)

    async def responses_operation(request: Request) -> Response:
        raw = await request.body()
        body = orjson.loads(raw)
        failure = await misbehave(request, body, raw)
        if failure is not None:
            return failure
        tokens = _prompt_tokens(body)
        if request.url.path.endswith("/input_tokens"):
            return _json({"object": "response.input_tokens", "input_tokens": tokens})
        compacted = {"type": "compaction", "id": "cmp_mock_1", "encrypted_content": "gAAAA-mock-compaction"}
        usage = {"input_tokens": tokens, "output_tokens": 20, "total_tokens": tokens + 20}
        return _json(
            {"id": "resp_compact_1", "object": "response.compaction", "output": [compacted], "usage": usage}
        )

    async def embeddings(request: Request) -> Response:
        body = orjson.loads(await request.body())
        failure = await misbehave(request, body)
        if failure is not None:
            return failure
        inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
        data = [
            {
                "object": "embedding",
                "index": i,
                "embedding": [((hash(str(text)) >> k) % 100) / 100 for k in range(8)],
            }
            for i, text in enumerate(inputs)
        ]
        tokens = sum(max(1, len(str(text)) // 4) for text in inputs)
        return _json(
            {
                "object": "list",
                "data": data,
                "model": body.get("model"),
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            }
        )

    async def moderations(request: Request) -> Response:
        """A route the gateway does not serve itself: reached only through its passthrough list."""
        body = orjson.loads(await request.body())
        failure = await misbehave(request, body)
        if failure is not None:
            return failure
        result = {"flagged": False, "categories": {}, "category_scores": {}}
        return _json({"id": "modr-mock", "model": body.get("model"), "results": [result]})

    async def models(request: Request) -> Response:
        return _json(
            {"object": "list", "data": [{"id": "mock", "object": "model", "created": 0, "owned_by": "mock"}]}
        )

    async def control(request: Request) -> Response:
        changes = orjson.loads(await request.body())
        state.cache.enabled = changes.pop("cache", state.cache.enabled)
        state.cache.age(changes.pop("cache_age_seconds", 0))
        state.cache.retention = changes.pop("cache_retention_seconds", state.cache.retention)
        for model, spec in (changes.pop("models", None) or {}).items():
            state.models[model] = ModelBehaviour.of(spec)
        for key, value in changes.items():
            setattr(state.behaviour, key, value)
        return _json(asdict(state.behaviour))

    async def requests_seen(request: Request) -> Response:
        since = int(request.query_params.get("since", "0"))
        return _json(
            {
                "requests": state.requests[since:],
                "streams_cancelled": state.streams_cancelled,
                "streams_finished": state.streams_finished,
            }
        )

    async def reset(request: Request) -> Response:
        state.behaviour = Behaviour()
        state.cache.enabled = True
        state.cache.reset()
        state.cache.retention = PromptCache.retention
        state.requests.clear()
        state.responses.clear()
        state.running.clear()
        state.models.clear()
        state.streams_cancelled = state.streams_finished = 0
        return _json({"ok": True})

    return Starlette(
        routes=[
            Route("/v1/chat/completions", chat, methods=["POST"]),
            Route("/v1/embeddings", embeddings, methods=["POST"]),
            Route("/v1/responses", responses, methods=["POST"]),
            Route("/v1/responses/input_tokens", responses_operation, methods=["POST"]),
            Route("/v1/responses/compact", responses_operation, methods=["POST"]),
            Route("/v1/responses/{response_id}", response_by_id, methods=["GET", "DELETE"]),
            Route("/v1/responses/{response_id}/{action}", response_by_id, methods=["GET", "POST"]),
            Route("/v1/models", models, methods=["GET"]),
            Route("/v1/moderations", moderations, methods=["POST"]),
            *messages_routes(state),  # Anthropic's Messages API (tests.mock.anthropic)
            Route("/_control", control, methods=["POST"]),
            Route("/_requests", requests_seen, methods=["GET"]),
            Route("/_reset", reset, methods=["POST"]),
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description="A mock OpenAI-compatible upstream")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9000)
    parser.add_argument("--agent-project", type=Path, help="answer as a scripted agent reading these files")
    parser.add_argument("--agent-calls", type=int, default=5, help="the agent's file reads per turn")
    args = parser.parse_args()
    agent = AgentScript.of(args.agent_project, args.agent_calls) if args.agent_project else None
    uvicorn.run(
        create_mock_app(agent),
        host=args.host,
        port=args.port,
        loop="uvloop",
        http="httptools",
        access_log=False,
        log_level="warning",
    )


if __name__ == "__main__":
    main()
